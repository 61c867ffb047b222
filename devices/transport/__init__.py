"""Transports move registers or bytes; they know nothing of cards."""
