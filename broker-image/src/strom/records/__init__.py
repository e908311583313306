"""Record batches (magic v2) as bytes: header fields read from memoryviews, CRC32C checks, offset patching."""
