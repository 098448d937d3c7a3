"""The leaderboard: Markdown generated from run records only."""
