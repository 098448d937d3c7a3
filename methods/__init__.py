"""Built-in methods. A method makes a candidate and never imports a suite."""
