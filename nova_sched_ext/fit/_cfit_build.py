"""cffi build script for the fit engine's C helper (out-of-line API mode).

``setup.py`` names it in ``cffi_modules``, so ``pip install`` compiles
``nova_sched_ext/fit/_c/cfit.c`` into the extension
``nova_sched_ext.fit._cfit``.
Run it directly (``python nova_sched_ext/fit/_cfit_build.py``) to build in
place.  The extension is imported by :mod:`nova_sched_ext.fit.lowlevel`
only, which checks that its constants and struct sizes are the Python
side's before using it.  ``NOVA_SCHED_EXT_SANITIZE=1`` builds with
AddressSanitizer and UndefinedBehaviorSanitizer for the ``tox -e asan``
run.
"""

import os
import re

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
C_DIR = os.path.join(HERE, '_c')


def _relative(path):
    # distutils wants source paths relative to the project root when it can.
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith('..') else rel


def _cdef():
    with open(os.path.join(C_DIR, 'cfit.h')) as header:
        text = header.read()
    # cffi's cdef has no preprocessor: keep the integer #defines, drop the
    # comments.
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return text


def _compile_args():
    args = ['-O2', '-std=c99', '-Wall', '-Wextra', '-Wno-unused-parameter']
    link = []
    if os.environ.get('NOVA_SCHED_EXT_SANITIZE') == '1':
        # float-cast-overflow is not part of GCC's "undefined" group: name
        # it, so that a NaN or huge double cast to an integer fails the run.
        checks = ('address,undefined,float-cast-overflow,'
                  'signed-integer-overflow')
        flags = ['-fsanitize=' + checks, '-fno-omit-frame-pointer',
                 '-fno-sanitize-recover=all', '-g', '-O1']
        args += flags
        link += flags
    return args, link


ffibuilder = cffi.FFI()
ffibuilder.cdef(_cdef())
_args, _link = _compile_args()
ffibuilder.set_source(
    'nova_sched_ext.fit._cfit',
    '#include <stdint.h>\n#include "cfit.h"\n',
    sources=[_relative(os.path.join(C_DIR, 'cfit.c'))],
    include_dirs=[_relative(C_DIR)],
    extra_compile_args=_args,
    extra_link_args=_link,
)

if __name__ == '__main__':
    ffibuilder.compile(tmpdir=os.path.dirname(os.path.dirname(HERE)),
                       verbose=True)
