"""Record batches (magic v2) as bytes.

``batches``: header fields read from memoryviews, CRC32C checks, produce-path validation,
offset patching, and a small encoder/decoder of the records inside uncompressed batches.
"""
