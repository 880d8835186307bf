"""``fwman driver settings`` as a use case: read what the host has, and the actions that make it match.

The reading and the actions are :mod:`fwman.driver.settings_host` (``fwman doctor`` reads the same report).
"""

from __future__ import annotations

from fwman.driver.settings_host import SettingsReport, inspect_settings, settings_actions

__all__ = ["SettingsReport", "inspect_settings", "settings_actions"]
