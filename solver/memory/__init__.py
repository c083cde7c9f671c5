"""Where a sequence's buffers sit on the device: static layout, non-tiled arena, heap, resident arena."""
