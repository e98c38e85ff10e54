#!lua flags=allow-cross-slot-keys
