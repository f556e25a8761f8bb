"""wmsuite.assets"""
