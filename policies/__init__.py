"""wmsuite.policies"""
