"""Resource limits of one sandboxed run, the same for every backend."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MIB = 2**20


class Limits(BaseModel):
    """What one execution may use; exceeding a limit ends the run as ``timeout`` or ``killed``."""

    model_config = ConfigDict(frozen=True)

    wall_s: float = Field(default=60.0, gt=0, le=3600, description="Wall-clock seconds.")
    cpu_s: int = Field(default=60, ge=1, le=3600, description="CPU seconds (RLIMIT_CPU).")
    memory_bytes: int = Field(
        default=1024 * MIB,
        ge=64 * MIB,
        description="Memory (cgroup where possible, else address space).",
    )
    output_bytes: int = Field(
        default=1 * MIB, ge=1024, description="Captured stdout and stderr, each; more is killed."
    )
    file_bytes: int = Field(
        default=64 * MIB, ge=1024, description="Largest single file written (RLIMIT_FSIZE)."
    )
    out_dir_bytes: int = Field(
        default=256 * MIB, ge=1024, description="All files left in /out together."
    )
    processes: int = Field(
        default=64, ge=4, le=4096, description="Processes and threads (RLIMIT_NPROC)."
    )
    open_files: int = Field(default=256, ge=32, le=65536, description="Open files (RLIMIT_NOFILE).")
    tmp_bytes: int = Field(default=256 * MIB, ge=MIB, description="Size of the private /tmp.")

    @property
    def address_space_bytes(self) -> int:
        """RLIMIT_AS: the memory limit plus room for the libraries' reserved-but-unused mappings."""
        return self.memory_bytes + 1024 * MIB
