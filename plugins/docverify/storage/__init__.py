"""Where a night's objects live: safe path parts, input limits, the artifact store, the typed run
store, the inputs checked again when used, the shard summaries."""
