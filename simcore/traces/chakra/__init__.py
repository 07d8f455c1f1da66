"""The Chakra execution-trace codec: wire decoding, columns, encode, cache, build, JSON, export."""
