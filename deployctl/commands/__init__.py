"""One module per verb; ``deployctl.cli`` discovers them."""
