// Misuses that the declarations must refuse in a CommonJS program: tsc fails
// if a line marked as an expected error type-checks.
import pf = require('packedfunc');

// @ts-expect-error require() gives the package's object, which has no default
pf.default.getGlobalFunc('demo.add');
// @ts-expect-error a name is a string
pf.getGlobalFunc(42);
