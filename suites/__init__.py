"""Built-in suites. A suite judges any candidate and never imports a method."""
