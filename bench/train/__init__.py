"""Training a candidate: the loop every method shares (best ID-dev checkpoint, NaN stops) and the
debiasing objectives it trains with. Above the plug-in contracts: it trains within a method's
``Context``."""
