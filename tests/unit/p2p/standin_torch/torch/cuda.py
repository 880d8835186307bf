"""torch.cuda of the stand-in: ``STANDIN_WORLD`` devices that do nothing."""

from __future__ import annotations

import os


def is_available() -> bool:
    return True


def device_count() -> int:
    return int(os.environ.get("STANDIN_WORLD", "2"))


def set_device(index: int) -> None:
    pass


def synchronize() -> None:
    pass


def get_device_name(index: int) -> str:
    return f"stand-in GPU {index}"


class nccl:
    @staticmethod
    def version() -> tuple[int, int, int]:
        return (0, 0, 0)
