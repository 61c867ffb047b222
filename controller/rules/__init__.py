"""The rules engine: pure functions and round procedures for 665a, 673a and 685a."""
