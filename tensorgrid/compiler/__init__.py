"""tensorgrid.compiler"""
