"""Exhaustive interleavings of the fencing protocol through the real code (issue 19); see explorer.py."""
