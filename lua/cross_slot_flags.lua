#!lua flags=allow-cross-slot-keys,allow-oom
