"""tensorgrid.framework"""
