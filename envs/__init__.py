"""wmsuite.envs"""
