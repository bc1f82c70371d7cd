; corpus: archs=sm_90a opts=-O0,-O2
; Exercises (llc, sm_90a): cluster intrinsics (cluster_ctarank, nctarank, clusterid, barrier.cluster arrive/wait, mapa.shared.cluster, getctarank, fence.sc.cluster), maxnreg / maxntidx kernel annotations (.maxnreg, .maxntid), ld.shared::cluster (inline asm) on a mapa.shared.cluster address, elect.sync via inline asm.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@buf = internal addrspace(3) global [128 x i32] undef, align 4

define void @cluster_ring(ptr addrspace(1) %out) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %rank = call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
  %n = call i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
  %cid = call i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
  %t64 = zext i32 %tid to i64
  %p = getelementptr inbounds [128 x i32], ptr addrspace(3) @buf, i64 0, i64 %t64
  %val = add i32 %rank, %tid
  store i32 %val, ptr addrspace(3) %p, align 4
  call void @llvm.nvvm.barrier.cluster.arrive()
  call void @llvm.nvvm.barrier.cluster.wait()
  %next0 = add i32 %rank, 1
  %next = urem i32 %next0, %n
  ; LLVM 19 returns the shared::cluster address in addrspace(3); read it with ld.shared::cluster via inline asm.
  %rp = call ptr addrspace(3) @llvm.nvvm.mapa.shared.cluster(ptr addrspace(3) %p, i32 %next)
  %ra = ptrtoint ptr addrspace(3) %rp to i32
  %rv = call i32 asm sideeffect "ld.shared::cluster.u32 $0, [$1];", "=r,r,~{memory}"(i32 %ra)
  %gp = addrspacecast ptr addrspace(3) %p to ptr
  %gr = call ptr @llvm.nvvm.mapa(ptr %gp, i32 %next)
  %owner = call i32 @llvm.nvvm.getctarank(ptr %gr)
  call void @llvm.nvvm.fence.sc.cluster()
  call void @llvm.nvvm.barrier.cluster.arrive.relaxed()
  call void @llvm.nvvm.barrier.cluster.wait()
  %lane = call i32 asm sideeffect "{\0A\09.reg .pred p;\0A\09elect.sync $0|p, 0xffffffff;\0A\09}", "=r"()
  %s0 = add i32 %rv, %owner
  %s1 = add i32 %s0, %cid
  %s2 = add i32 %s1, %lane
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %g = mul i32 %ctaid, 128
  %gi = add i32 %g, %tid
  %gi64 = zext i32 %gi to i64
  %op = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %gi64
  store i32 %s2, ptr addrspace(1) %op, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.cluster.nctarank()
declare i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()
declare void @llvm.nvvm.barrier.cluster.arrive()
declare void @llvm.nvvm.barrier.cluster.arrive.relaxed()
declare void @llvm.nvvm.barrier.cluster.wait()
declare ptr addrspace(3) @llvm.nvvm.mapa.shared.cluster(ptr addrspace(3), i32)
declare ptr @llvm.nvvm.mapa(ptr, i32)
declare i32 @llvm.nvvm.getctarank(ptr)
declare void @llvm.nvvm.fence.sc.cluster()

!nvvm.annotations = !{!0, !1, !2}
!0 = !{ptr @cluster_ring, !"kernel", i32 1}
!1 = !{ptr @cluster_ring, !"maxnreg", i32 64}
!2 = !{ptr @cluster_ring, !"maxntidx", i32 128}
