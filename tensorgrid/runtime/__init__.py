"""tensorgrid.runtime"""
