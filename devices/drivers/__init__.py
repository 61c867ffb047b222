"""One driver per device kind: registers or frames in, typed events out; typed commands in."""
