"""The node: what the machine offers and how a rank is placed on it."""
