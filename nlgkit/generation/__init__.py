"""What ``translate`` and ``caption`` do below the CLI: inputs → sources → search → output lines."""
