"""The FlatBuffers schema of the manifest and the script that regenerates its Python code."""
