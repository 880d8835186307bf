"""Allow ``python -m fwman``."""

from fwman.cli.app import main

if __name__ == "__main__":
    main()
