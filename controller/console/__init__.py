"""The table console: a dealer display and a floor console served by the appliance (docs/console.md)."""
