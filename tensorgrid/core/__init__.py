"""tensorgrid.core"""
