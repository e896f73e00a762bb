"""retriever."""
