"""The table core: procedure at one table as a pure state machine (see core.py)."""
