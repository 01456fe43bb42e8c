"""The loop run_cases.py and plant_real.py share: each named check in a
scratch folder of its own (kept with GPURR_KEEP=1), its first docstring line
said before it runs, its failure said after; exit status 1 when any failed."""
import os
import shutil
import tempfile
import time


def run(table, names, failure, scratch, prefix):
    """Runs the checks `names` of `table` (name -> function); `scratch(path)`
    tells the caller the folder each writes in; `failure` is the exception a
    check raises when an expectation does not hold."""
    failed = []
    for name in names:
        tmp = tempfile.mkdtemp(prefix=prefix)
        scratch(tmp)
        t0 = time.time()
        print('== %s: %s' % (name, (table[name].__doc__ or '').split('\n')[0]))
        try:
            table[name]()
            print('== %s passed (%.1f s)' % (name, time.time() - t0))
        except failure as e:
            print('FAIL %s: %s' % (name, e))
            failed.append(name)
        finally:
            if not os.environ.get('GPURR_KEEP'):
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                print('   traces kept in ' + tmp)
    return 1 if failed else 0
