"""median_blur on the CPU: min/max selection networks over whole rows.

Per output row the k source rows (replicated borders, OpenCV's medianBlur) are copied
into a k-row buffer with k//2 replicated pixels each side; the k*k window values of every
row element are then k*k shifted views of that buffer, and the median is a fixed network
of min/max operations (Batcher's odd-even merge sort on 16 / 32 wires, +inf padding, pruned
to the operations the middle output needs: 40 for 3x3, 202 for 5x5; written out below by
:func:`network`). Branch-free, so the loop over the row vectorises. The median is exact,
so results equal the generic twin's for every dtype.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from . import dense, kernel, per_plane, planes


def network(m):
    """Lines of the pruned median-of-``m`` min/max network on v0..v{m-1} (the generator of
    the code below) and the name holding the median; checked by tests/test_cpu_fast.py."""
    n = 1
    while n < m:
        n *= 2
    ops = []  # Batcher's odd-even merge sort on n wires
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        ops.append((i + j, i + j + k))
            k //= 2
        p *= 2
    nodes = [("in", i, None) for i in range(m)]
    cur = list(range(m)) + [None] * (n - m)  # None: +inf
    for i, j in ops:
        a, b = cur[i], cur[j]
        if b is None:
            continue
        if a is None:
            cur[i], cur[j] = b, None
            continue
        nodes += [("min", a, b), ("max", a, b)]
        cur[i], cur[j] = len(nodes) - 2, len(nodes) - 1
    need, stack = set(), [cur[m // 2]]
    while stack:
        x = stack.pop()
        if x not in need:
            need.add(x)
            if nodes[x][0] != "in":
                stack += [nodes[x][1], nodes[x][2]]

    def name(x):
        return f"v{nodes[x][1]}" if nodes[x][0] == "in" else f"t{x}"

    lines = [f"t{x} = {nodes[x][0]}({name(nodes[x][1])}, {name(nodes[x][2])})"
             for x in sorted(need) if nodes[x][0] != "in"]
    return lines, name(cur[m // 2])


def _median(src, dst, ks, c):
    n_, h, wc = src.shape
    w = wc // c
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        k = ks[p]
        r = k // 2
        pb = np.empty((k, wc + 2 * r * c), src.dtype)
        for dy in range(k):
            sr = src[p, min(max(y + dy - r, 0), h - 1)]
            row = pb[dy]
            mid = row[r * c:r * c + wc]
            for i in range(wc):
                mid[i] = sr[i]
            for x in range(r):
                for ch in range(c):
                    row[x * c + ch] = sr[ch]
                    row[(w + r + x) * c + ch] = sr[(w - 1) * c + ch]
        d = dst[p, y]
        if k == 3:
            w0 = pb[0][0 * c:0 * c + wc]
            w1 = pb[0][1 * c:1 * c + wc]
            w2 = pb[0][2 * c:2 * c + wc]
            w3 = pb[1][0 * c:0 * c + wc]
            w4 = pb[1][1 * c:1 * c + wc]
            w5 = pb[1][2 * c:2 * c + wc]
            w6 = pb[2][0 * c:0 * c + wc]
            w7 = pb[2][1 * c:1 * c + wc]
            w8 = pb[2][2 * c:2 * c + wc]
            for i in range(wc):
                v0 = w0[i]
                v1 = w1[i]
                v2 = w2[i]
                v3 = w3[i]
                v4 = w4[i]
                v5 = w5[i]
                v6 = w6[i]
                v7 = w7[i]
                v8 = w8[i]
                t9 = min(v0, v1)
                t10 = max(v0, v1)
                t11 = min(v2, v3)
                t12 = max(v2, v3)
                t13 = min(v4, v5)
                t14 = max(v4, v5)
                t15 = min(v6, v7)
                t16 = max(v6, v7)
                t17 = min(t9, t11)
                t18 = max(t9, t11)
                t19 = min(t10, t12)
                t20 = max(t10, t12)
                t21 = min(t13, t15)
                t22 = max(t13, t15)
                t23 = min(t14, t16)
                t24 = max(t14, t16)
                t25 = min(t19, t18)
                t26 = max(t19, t18)
                t27 = min(t23, t22)
                t28 = max(t23, t22)
                t29 = min(t17, t21)
                t30 = max(t17, t21)
                t31 = min(t25, t27)
                t32 = max(t25, t27)
                t33 = min(t26, t28)
                t34 = max(t26, t28)
                t35 = min(t20, t24)
                t37 = min(t33, t30)
                t38 = max(t33, t30)
                t39 = min(t35, t32)
                t40 = max(t35, t32)
                t42 = max(t31, t37)
                t43 = min(t39, t38)
                t44 = max(t39, t38)
                t45 = min(t40, t34)
                t48 = max(t29, v8)
                t49 = min(t44, t48)
                t52 = max(t42, t49)
                t53 = min(t43, t45)
                t60 = max(t53, t52)
                d[i] = t60
        else:
            w0 = pb[0][0 * c:0 * c + wc]
            w1 = pb[0][1 * c:1 * c + wc]
            w2 = pb[0][2 * c:2 * c + wc]
            w3 = pb[0][3 * c:3 * c + wc]
            w4 = pb[0][4 * c:4 * c + wc]
            w5 = pb[1][0 * c:0 * c + wc]
            w6 = pb[1][1 * c:1 * c + wc]
            w7 = pb[1][2 * c:2 * c + wc]
            w8 = pb[1][3 * c:3 * c + wc]
            w9 = pb[1][4 * c:4 * c + wc]
            w10 = pb[2][0 * c:0 * c + wc]
            w11 = pb[2][1 * c:1 * c + wc]
            w12 = pb[2][2 * c:2 * c + wc]
            w13 = pb[2][3 * c:3 * c + wc]
            w14 = pb[2][4 * c:4 * c + wc]
            w15 = pb[3][0 * c:0 * c + wc]
            w16 = pb[3][1 * c:1 * c + wc]
            w17 = pb[3][2 * c:2 * c + wc]
            w18 = pb[3][3 * c:3 * c + wc]
            w19 = pb[3][4 * c:4 * c + wc]
            w20 = pb[4][0 * c:0 * c + wc]
            w21 = pb[4][1 * c:1 * c + wc]
            w22 = pb[4][2 * c:2 * c + wc]
            w23 = pb[4][3 * c:3 * c + wc]
            w24 = pb[4][4 * c:4 * c + wc]
            for i in range(wc):
                v0 = w0[i]
                v1 = w1[i]
                v2 = w2[i]
                v3 = w3[i]
                v4 = w4[i]
                v5 = w5[i]
                v6 = w6[i]
                v7 = w7[i]
                v8 = w8[i]
                v9 = w9[i]
                v10 = w10[i]
                v11 = w11[i]
                v12 = w12[i]
                v13 = w13[i]
                v14 = w14[i]
                v15 = w15[i]
                v16 = w16[i]
                v17 = w17[i]
                v18 = w18[i]
                v19 = w19[i]
                v20 = w20[i]
                v21 = w21[i]
                v22 = w22[i]
                v23 = w23[i]
                v24 = w24[i]
                t25 = min(v0, v1)
                t26 = max(v0, v1)
                t27 = min(v2, v3)
                t28 = max(v2, v3)
                t29 = min(v4, v5)
                t30 = max(v4, v5)
                t31 = min(v6, v7)
                t32 = max(v6, v7)
                t33 = min(v8, v9)
                t34 = max(v8, v9)
                t35 = min(v10, v11)
                t36 = max(v10, v11)
                t37 = min(v12, v13)
                t38 = max(v12, v13)
                t39 = min(v14, v15)
                t40 = max(v14, v15)
                t41 = min(v16, v17)
                t42 = max(v16, v17)
                t43 = min(v18, v19)
                t44 = max(v18, v19)
                t45 = min(v20, v21)
                t46 = max(v20, v21)
                t47 = min(v22, v23)
                t48 = max(v22, v23)
                t49 = min(t25, t27)
                t50 = max(t25, t27)
                t51 = min(t26, t28)
                t52 = max(t26, t28)
                t53 = min(t29, t31)
                t54 = max(t29, t31)
                t55 = min(t30, t32)
                t56 = max(t30, t32)
                t57 = min(t33, t35)
                t58 = max(t33, t35)
                t59 = min(t34, t36)
                t60 = max(t34, t36)
                t61 = min(t37, t39)
                t62 = max(t37, t39)
                t63 = min(t38, t40)
                t64 = max(t38, t40)
                t65 = min(t41, t43)
                t66 = max(t41, t43)
                t67 = min(t42, t44)
                t68 = max(t42, t44)
                t69 = min(t45, t47)
                t70 = max(t45, t47)
                t71 = min(t46, t48)
                t72 = max(t46, t48)
                t73 = min(t51, t50)
                t74 = max(t51, t50)
                t75 = min(t55, t54)
                t76 = max(t55, t54)
                t77 = min(t59, t58)
                t78 = max(t59, t58)
                t79 = min(t63, t62)
                t80 = max(t63, t62)
                t81 = min(t67, t66)
                t82 = max(t67, t66)
                t83 = min(t71, t70)
                t84 = max(t71, t70)
                t85 = min(t49, t53)
                t86 = max(t49, t53)
                t87 = min(t73, t75)
                t88 = max(t73, t75)
                t89 = min(t74, t76)
                t90 = max(t74, t76)
                t91 = min(t52, t56)
                t92 = max(t52, t56)
                t93 = min(t57, t61)
                t94 = max(t57, t61)
                t95 = min(t77, t79)
                t96 = max(t77, t79)
                t97 = min(t78, t80)
                t98 = max(t78, t80)
                t99 = min(t60, t64)
                t100 = max(t60, t64)
                t101 = min(t65, t69)
                t102 = max(t65, t69)
                t103 = min(t81, t83)
                t104 = max(t81, t83)
                t105 = min(t82, t84)
                t106 = max(t82, t84)
                t107 = min(t68, t72)
                t108 = max(t68, t72)
                t109 = min(t89, t86)
                t110 = max(t89, t86)
                t111 = min(t91, t88)
                t112 = max(t91, t88)
                t113 = min(t97, t94)
                t114 = max(t97, t94)
                t115 = min(t99, t96)
                t116 = max(t99, t96)
                t117 = min(t105, t102)
                t118 = max(t105, t102)
                t119 = min(t107, t104)
                t120 = max(t107, t104)
                t121 = min(t87, t109)
                t122 = max(t87, t109)
                t123 = min(t111, t110)
                t124 = max(t111, t110)
                t125 = min(t112, t90)
                t126 = max(t112, t90)
                t127 = min(t95, t113)
                t128 = max(t95, t113)
                t129 = min(t115, t114)
                t130 = max(t115, t114)
                t131 = min(t116, t98)
                t132 = max(t116, t98)
                t133 = min(t103, t117)
                t134 = max(t103, t117)
                t135 = min(t119, t118)
                t136 = max(t119, t118)
                t137 = min(t120, t106)
                t138 = max(t120, t106)
                t139 = min(t85, t93)
                t140 = max(t85, t93)
                t141 = min(t121, t127)
                t142 = max(t121, t127)
                t143 = min(t122, t128)
                t144 = max(t122, t128)
                t145 = min(t123, t129)
                t146 = max(t123, t129)
                t147 = min(t124, t130)
                t148 = max(t124, t130)
                t149 = min(t125, t131)
                t150 = max(t125, t131)
                t151 = min(t126, t132)
                t152 = max(t126, t132)
                t153 = min(t92, t100)
                t155 = min(t101, v24)
                t156 = max(t101, v24)
                t157 = min(t147, t140)
                t158 = max(t147, t140)
                t159 = min(t149, t142)
                t160 = max(t149, t142)
                t161 = min(t151, t144)
                t162 = max(t151, t144)
                t163 = min(t153, t146)
                t164 = max(t153, t146)
                t165 = min(t136, t156)
                t166 = max(t136, t156)
                t167 = min(t143, t157)
                t168 = max(t143, t157)
                t169 = min(t145, t159)
                t170 = max(t145, t159)
                t171 = min(t161, t158)
                t172 = max(t161, t158)
                t173 = min(t163, t160)
                t174 = max(t163, t160)
                t175 = min(t162, t148)
                t176 = max(t162, t148)
                t177 = min(t164, t150)
                t178 = max(t164, t150)
                t179 = min(t134, t165)
                t180 = max(t134, t165)
                t181 = min(t135, t137)
                t182 = max(t135, t137)
                t183 = min(t138, t166)
                t184 = max(t138, t166)
                t185 = min(t141, t167)
                t186 = max(t141, t167)
                t187 = min(t169, t168)
                t188 = max(t169, t168)
                t189 = min(t170, t171)
                t190 = max(t170, t171)
                t191 = min(t173, t172)
                t192 = max(t173, t172)
                t193 = min(t174, t175)
                t194 = max(t174, t175)
                t195 = min(t177, t176)
                t196 = max(t177, t176)
                t197 = min(t178, t152)
                t199 = min(t133, t179)
                t200 = max(t133, t179)
                t201 = min(t181, t180)
                t202 = max(t181, t180)
                t203 = min(t182, t183)
                t204 = max(t182, t183)
                t205 = min(t108, t184)
                t206 = max(t108, t184)
                t208 = max(t139, t155)
                t210 = max(t185, t199)
                t212 = max(t186, t200)
                t214 = max(t187, t201)
                t216 = max(t188, t202)
                t218 = max(t189, t203)
                t219 = min(t190, t204)
                t221 = min(t191, t205)
                t223 = min(t192, t206)
                t226 = max(t223, t208)
                t228 = max(t193, t210)
                t229 = min(t194, t212)
                t231 = min(t195, t214)
                t233 = min(t196, t216)
                t235 = min(t197, t218)
                t246 = max(t219, t229)
                t248 = max(t221, t231)
                t249 = min(t233, t226)
                t251 = min(t235, t228)
                t268 = max(t246, t249)
                t269 = min(t248, t251)
                t292 = max(t269, t268)
                d[i] = t292


def median(src, dst, params):
    """Fast path of the median_blur kernel (same arguments); False if not applicable."""
    ks = params[:, 0].astype(np.int64)
    if src.dtype not in (np.uint8, np.float32) or dst.dtype != src.dtype or not np.isin(ks, (3, 5)).all():
        return False
    done = None
    pl = planes(src, dst)
    if pl is None:  # strided views: through dense copies
        src, dst, done = dense(src, dst)
        pl = planes(src, dst)
    s, d, c, per = pl
    p_, h, w = s.shape[:3]
    kernel(_median)(s.reshape(p_, h, w * c), d.reshape(p_, h, w * c), per_plane(ks, per), c)
    if done is not None:
        done()
    return True
