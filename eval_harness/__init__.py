"""wmsuite.eval_harness"""
