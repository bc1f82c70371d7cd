; corpus: archs=sm_80,sm_90a opts=-O0,-O2
; Exercises (llc): non-kernel .func definitions with scalar, vector, aggregate (byval) parameters and aggregate returns, recursion, indirect calls through a function-pointer table in global memory (.callprototype), a kernel using the ptx_kernel calling convention, noinline attributes, local allocas.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

%struct.Vec = type { float, float, float, i32 }

@fn_table = internal addrspace(1) global [2 x ptr] [ptr @twice, ptr @square], align 8

define internal float @twice(float %x) #0 {
  %r = fmul float %x, 2.0
  ret float %r
}

define internal float @square(float %x) #0 {
  %r = fmul float %x, %x
  ret float %r
}

define internal { float, i32 } @split(%struct.Vec %v) #0 {
  %x = extractvalue %struct.Vec %v, 0
  %y = extractvalue %struct.Vec %v, 1
  %z = extractvalue %struct.Vec %v, 2
  %w = extractvalue %struct.Vec %v, 3
  %s0 = fadd float %x, %y
  %s = fadd float %s0, %z
  %r0 = insertvalue { float, i32 } undef, float %s, 0
  %r = insertvalue { float, i32 } %r0, i32 %w, 1
  ret { float, i32 } %r
}

define internal float @dot_byval(ptr byval(%struct.Vec) align 4 %a, ptr byval(%struct.Vec) align 4 %b) #0 {
  %ax = load float, ptr %a, align 4
  %bx = load float, ptr %b, align 4
  %ayp = getelementptr inbounds %struct.Vec, ptr %a, i32 0, i32 1
  %byp = getelementptr inbounds %struct.Vec, ptr %b, i32 0, i32 1
  %ay = load float, ptr %ayp, align 4
  %by = load float, ptr %byp, align 4
  %m0 = fmul float %ax, %bx
  %m1 = fmul float %ay, %by
  %r = fadd float %m0, %m1
  ret float %r
}

define internal <2 x float> @rot90(<2 x float> %v) #0 {
  %x = extractelement <2 x float> %v, i32 0
  %y = extractelement <2 x float> %v, i32 1
  %ny = fneg float %y
  %r0 = insertelement <2 x float> undef, float %ny, i32 0
  %r = insertelement <2 x float> %r0, float %x, i32 1
  ret <2 x float> %r
}

define internal i32 @fact(i32 %n) #0 {
entry:
  %le = icmp sle i32 %n, 1
  br i1 %le, label %base, label %rec
base:
  ret i32 1
rec:
  %n1 = sub i32 %n, 1
  %f = call i32 @fact(i32 %n1)
  %r = mul i32 %n, %f
  ret i32 %r
}

define ptx_kernel void @call_kernel(ptr addrspace(1) %out, ptr addrspace(1) %iout, float %x, i32 %sel) {
entry:
  %va = alloca %struct.Vec, align 4
  %vb = alloca %struct.Vec, align 4
  store %struct.Vec { float 1.0, float 2.0, float 3.0, i32 4 }, ptr %va, align 4
  %xv0 = insertvalue %struct.Vec undef, float %x, 0
  %xv1 = insertvalue %struct.Vec %xv0, float %x, 1
  %xv2 = insertvalue %struct.Vec %xv1, float 0.5, 2
  %xv = insertvalue %struct.Vec %xv2, i32 %sel, 3
  store %struct.Vec %xv, ptr %vb, align 4
  %d = call float @dot_byval(ptr byval(%struct.Vec) align 4 %va, ptr byval(%struct.Vec) align 4 %vb)
  %sp = call { float, i32 } @split(%struct.Vec %xv)
  %s = extractvalue { float, i32 } %sp, 0
  %w = extractvalue { float, i32 } %sp, 1
  %idx = and i32 %sel, 1
  %idx64 = zext i32 %idx to i64
  %slot = getelementptr inbounds [2 x ptr], ptr addrspace(1) @fn_table, i64 0, i64 %idx64
  %fp = load ptr, ptr addrspace(1) %slot, align 8
  %ind = call float %fp(float %d)
  %v0 = insertelement <2 x float> undef, float %s, i32 0
  %v = insertelement <2 x float> %v0, float %ind, i32 1
  %rv = call <2 x float> @rot90(<2 x float> %v)
  %e0 = extractelement <2 x float> %rv, i32 0
  %e1 = extractelement <2 x float> %rv, i32 1
  %sum = fadd float %e0, %e1
  store float %sum, ptr addrspace(1) %out, align 4
  %n = and i32 %w, 7
  %f = call i32 @fact(i32 %n)
  store i32 %f, ptr addrspace(1) %iout, align 4
  ret void
}

attributes #0 = { noinline }
