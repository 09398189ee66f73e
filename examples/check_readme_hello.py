#!/usr/bin/env python3
"""Fails unless README.md holds hello.c verbatim, as a ```c block: the snippet readers copy is
the program the test suite builds and runs."""
import re
import sys

readme, hello = (open(p, encoding='utf-8').read() for p in sys.argv[1:3])
blocks = re.findall(r'^```c\n(.*?)^```$', readme, re.S | re.M)
if hello not in blocks:
    sys.exit('README.md has no ```c block identical to %s; copy it over' % sys.argv[2])
