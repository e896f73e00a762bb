"""codeagent."""
