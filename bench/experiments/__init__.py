"""Experiment drivers: runs that train or evaluate agents for their scores (results in bench/results/)."""
