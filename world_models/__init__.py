"""wmsuite.world_models"""
