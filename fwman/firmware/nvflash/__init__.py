"""nvflash."""
