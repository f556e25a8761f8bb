"""wmsuite.cuda_ops"""
