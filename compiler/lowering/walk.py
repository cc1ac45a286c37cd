"""Walking a kernel's scalar expressions, the same for every code generator.

``ExpressionWalker.gen(i, cache)`` renders expression ``i`` of ``self.k`` (a Kernel,
description.py) once, its arguments first, by the renderer's methods for each kind of
expression: ``load(buffer, dtype)``, ``acc_values[j]`` (the reductions' totals), ``const(value,
dtype)``, ``cast(x, src, dst)``, ``cmp(op, x, y, dtype)``, ``select(c, a, b)``, ``math(name,
args, dtype)`` and ``op_<name>(*args, dtype)`` (the scalar builder of scalar.py).
``bind(expr, value)`` turns a computed value into what later uses read (LLVM: the value
itself; C: a named variable).
"""


class ExpressionWalker:
    def gen(self, i, cache):
        if i in cache:
            return cache[i]
        e = self.k.exprs[i]
        args = [self.gen(a, cache) for a in e.args]
        if e.op == "acc":
            v = self.acc_values[e.attr]
        elif e.op == "const":
            v = self.const(e.attr, e.dtype)
        else:
            if e.op == "load":
                v = self.load(e.attr, e.dtype)
            elif e.op == "cast":
                v = self.cast(args[0], self.k.exprs[e.args[0]].dtype, e.dtype)
            elif e.op == "cmp":
                v = self.cmp(e.attr, args[0], args[1], self.k.exprs[e.args[0]].dtype)
            elif e.op == "select":
                v = self.select(*args)
            elif e.op == "math":
                v = self.math(e.attr, args, e.dtype)
            else:
                v = getattr(self, "op_" + e.op)(*args, e.dtype)
            v = self.bind(e, v)
        cache[i] = v
        return v

    def bind(self, expr, value):
        return value
