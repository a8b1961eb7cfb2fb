"""Android support files: the fake adb device and its stand-in container image (tests and debugging)."""
