"""The typed contract of an output folder (OUT): every name in it, the manifest, the build state,
the per-shard records, and reading what builds left there."""
