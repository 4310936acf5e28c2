"""The package's triggers (the provider layout: ``triggers/``); each runs on the triggerer."""
