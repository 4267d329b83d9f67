	.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
	.amdhsa_code_object_version 6
	.text
	.globl	pa_decode_merge_kernel_0
	.p2align	8
	.type	pa_decode_merge_kernel_0,@function
pa_decode_merge_kernel_0:
	s_load_dwordx8 s[4:11], s[0:1], 0x0
	s_load_dwordx4 s[12:15], s[0:1], 0x20
	s_ashr_i32 s3, s2, 31
	s_lshl_b64 s[0:1], s[2:3], 2
	v_lshrrev_b32_e32 v2, 4, v0
	s_waitcnt lgkmcnt(0)
	s_add_u32 s0, s10, s0
	s_addc_u32 s1, s11, s1
	s_load_dword s0, s[0:1], 0x0
	s_abs_i32 s1, s14
	v_cvt_f32_u32_e32 v1, s1
	s_lshl_b32 s10, s12, 7
	s_sub_i32 s16, 0, s1
	s_waitcnt lgkmcnt(0)
	s_min_i32 s0, s0, s10
	v_rcp_f32_e32 v1, v1
	s_max_i32 s0, s0, 0
	s_add_i32 s12, s0, -1
	s_add_i32 s0, s12, s14
	v_mul_f32_e32 v1, 0x4f7ffffe, v1
	v_cvt_u32_f32_e32 v1, v1
	s_abs_i32 s11, s0
	s_xor_b32 s10, s0, s14
	s_ashr_i32 s15, s10, 31
	v_readfirstlane_b32 s17, v1
	s_mul_i32 s16, s16, s17
	s_mul_hi_u32 s16, s17, s16
	s_add_i32 s17, s17, s16
	s_mul_hi_u32 s16, s11, s17
	s_mul_i32 s17, s16, s1
	s_sub_i32 s11, s11, s17
	s_add_i32 s17, s16, 1
	s_sub_i32 s18, s11, s1
	s_cmp_ge_u32 s11, s1
	s_cselect_b32 s16, s17, s16
	s_cselect_b32 s11, s18, s11
	s_add_i32 s17, s16, 1
	s_cmp_ge_u32 s11, s1
	s_cselect_b32 s1, s17, s16
	s_xor_b32 s16, s1, s15
	s_sub_i32 s1, s16, s15
	s_mul_i32 s1, s1, s14
	s_cmp_lg_u32 s0, s1
	s_cselect_b64 s[0:1], -1, 0
	s_cmp_lt_i32 s10, 0
	s_cselect_b64 s[10:11], -1, 0
	s_and_b64 s[0:1], s[0:1], s[10:11]
	s_subb_u32 s0, s16, s15
	s_add_i32 s10, s0, 0xff
	s_ashr_i32 s0, s10, 31
	s_lshr_b32 s0, s0, 24
	s_add_i32 s0, s10, s0
	s_ashr_i32 s15, s0, 8
	s_and_b32 s0, s0, 0xffffff00
	s_cmp_lg_u32 s10, s0
	s_cselect_b64 s[0:1], -1, 0
	s_cmp_lt_i32 s10, 0
	s_cselect_b64 s[10:11], -1, 0
	s_and_b64 s[0:1], s[10:11], s[0:1]
	s_subb_u32 s0, s15, 0
	s_lshl_b32 s0, s0, 8
	s_max_i32 s0, s0, 0x100
	s_min_i32 s0, s13, s0
	s_abs_i32 s1, s0
	v_cvt_f32_u32_e32 v1, s1
	v_lshlrev_b32_e32 v0, 3, v0
	v_and_b32_e32 v3, 0x78, v0
	s_sub_i32 s11, 0, s1
	v_rcp_f32_e32 v1, v1
	s_add_i32 s12, s12, s0
	s_xor_b32 s10, s12, s0
	s_ashr_i32 s15, s10, 31
	v_mul_f32_e32 v0, 0x4f7ffffe, v1
	v_cvt_u32_f32_e32 v0, v0
	s_abs_i32 s10, s12
	v_mov_b32_e32 v18, 0
	v_readfirstlane_b32 s16, v0
	s_mul_i32 s11, s11, s16
	s_mul_hi_u32 s11, s16, s11
	s_add_i32 s16, s16, s11
	s_mul_hi_u32 s11, s10, s16
	s_mul_i32 s16, s11, s1
	s_sub_i32 s10, s10, s16
	s_add_i32 s16, s11, 1
	s_sub_i32 s17, s10, s1
	s_cmp_ge_u32 s10, s1
	s_cselect_b32 s11, s16, s11
	s_cselect_b32 s10, s17, s10
	s_add_i32 s16, s11, 1
	s_cmp_ge_u32 s10, s1
	s_cselect_b32 s1, s16, s11
	s_xor_b32 s16, s1, s15
	s_sub_i32 s1, s16, s15
	s_mul_i32 s0, s0, s1
	s_cmp_lg_u32 s12, s0
	s_cselect_b64 s[0:1], -1, 0
	s_xor_b32 s10, s12, s13
	s_cmp_lt_i32 s10, 0
	s_cselect_b64 s[10:11], -1, 0
	s_and_b64 s[0:1], s[0:1], s[10:11]
	s_subb_u32 s0, s16, s15
	s_min_i32 s10, s0, s14
	s_cmp_lt_i32 s10, 1
	s_cbranch_scc1 .LBB0_5
	s_and_b32 s20, s10, 3
	s_mul_hi_i32 s1, s14, s2
	s_mul_i32 s0, s14, s2
	v_lshlrev_b32_e32 v12, 2, v3
	s_cmp_lt_u32 s10, 4
	v_lshlrev_b32_e32 v10, 3, v2
	s_cbranch_scc1 .LBB0_6
	s_and_b32 s22, s10, 0x7ffffffc
	s_lshl_b64 s[10:11], s[0:1], 13
	v_lshl_or_b32 v0, v2, 9, s10
	v_mov_b32_e32 v1, s11
	v_or_b32_e32 v0, v0, v12
	v_lshl_add_u64 v[0:1], s[6:7], 0, v[0:1]
	s_mov_b64 s[10:11], 0x4000
	v_lshl_add_u64 v[14:15], v[0:1], 0, s[10:11]
	s_lshl_b64 s[10:11], s[0:1], 7
	s_add_u32 s10, s8, s10
	v_mov_b32_e32 v11, 0
	s_addc_u32 s11, s9, s11
	v_lshl_add_u64 v[0:1], s[10:11], 0, v[10:11]
	s_mov_b64 s[10:11], 0x180
	v_lshl_add_u64 v[16:17], v[0:1], 0, s[10:11]
	s_mov_b32 s21, 0
	v_mov_b32_e32 v19, 0xff800000
	v_mov_b32_e32 v18, 0
	s_movk_i32 s10, 0xc000
	s_mov_b32 s11, -1
	s_movk_i32 s23, 0xc000
	s_movk_i32 s12, 0xe000
	s_mov_b32 s13, -1
	s_movk_i32 s24, 0xe000
	s_mov_b64 s[14:15], 0x2000
	s_movk_i32 s25, 0x2000
	s_mov_b64 s[16:17], 0x8000
	s_mov_b64 s[18:19], 0x200
	v_mov_b32_e32 v0, v11
	v_mov_b32_e32 v1, v11
	v_mov_b32_e32 v4, v11
	v_mov_b32_e32 v5, v11
	v_mov_b32_e32 v6, v11
	v_mov_b32_e32 v7, v11
	v_mov_b32_e32 v8, v11
	v_mov_b32_e32 v9, v11
	.p2align	5, , 4
.LBB0_3:
	global_load_dwordx2 v[52:53], v[16:17], off offset:-384
	global_load_dwordx2 v[54:55], v[16:17], off offset:-256
	global_load_dwordx2 v[56:57], v[16:17], off offset:-128
	global_load_dwordx2 v[58:59], v[16:17], off
	v_add_co_u32_e32 v46, vcc, s23, v14
	v_lshl_add_u64 v[44:45], v[14:15], 0, s[10:11]
	s_nop 0
	v_addc_co_u32_e32 v47, vcc, -1, v15, vcc
	v_add_co_u32_e32 v50, vcc, s24, v14
	v_lshl_add_u64 v[48:49], v[14:15], 0, s[12:13]
	s_nop 0
	v_addc_co_u32_e32 v51, vcc, -1, v15, vcc
	v_add_co_u32_e32 v62, vcc, s25, v14
	v_lshl_add_u64 v[60:61], v[14:15], 0, s[14:15]
	s_nop 0
	v_addc_co_u32_e32 v63, vcc, 0, v15, vcc
	global_load_dwordx4 v[28:31], v[46:47], off
	global_load_dwordx4 v[32:35], v[44:45], off offset:16
	global_load_dwordx4 v[36:39], v[50:51], off
	global_load_dwordx4 v[40:43], v[48:49], off offset:16
	s_nop 0
	global_load_dwordx4 v[44:47], v[62:63], off
	global_load_dwordx4 v[48:51], v[60:61], off offset:16
	global_load_dwordx4 v[20:23], v[14:15], off offset:16
	global_load_dwordx4 v[24:27], v[14:15], off
	v_max_f32_e32 v11, v19, v19
	s_add_i32 s21, s21, 4
	v_lshl_add_u64 v[14:15], v[14:15], 0, s[16:17]
	v_lshl_add_u64 v[16:17], v[16:17], 0, s[18:19]
	s_cmp_lg_u32 s22, s21
	s_waitcnt vmcnt(11)
	v_max_f32_e32 v13, v52, v52
	v_max_f32_e32 v11, v11, v13
	v_sub_f32_e32 v13, v19, v11
	v_sub_f32_e32 v19, v52, v11
	v_exp_f32_e32 v19, v19
	v_exp_f32_e32 v52, v13
	s_waitcnt vmcnt(10)
	v_max_f32_e32 v60, v54, v54
	v_max_f32_e32 v63, v11, v60
	s_waitcnt vmcnt(9)
	v_max_f32_e32 v61, v56, v56
	v_sub_f32_e32 v11, v11, v63
	v_sub_f32_e32 v13, v54, v63
	v_mul_f32_e32 v60, v53, v19
	v_max_f32_e32 v53, v63, v61
	v_pk_mul_f32 v[8:9], v[8:9], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[52:53] op_sel_hi:[1,0]
	v_mul_f32_e32 v52, v18, v52
	v_exp_f32_e32 v18, v11
	v_exp_f32_e32 v11, v13
	s_waitcnt vmcnt(8)
	v_max_f32_e32 v62, v58, v58
	v_sub_f32_e32 v13, v63, v53
	v_sub_f32_e32 v54, v56, v53
	v_max_f32_e32 v19, v53, v62
	s_waitcnt vmcnt(7)
	v_pk_mul_f32 v[28:29], v[28:29], v[60:61] op_sel_hi:[1,0]
	v_pk_mul_f32 v[30:31], v[30:31], v[60:61] op_sel_hi:[1,0]
	s_waitcnt vmcnt(6)
	v_pk_mul_f32 v[32:33], v[32:33], v[60:61] op_sel_hi:[1,0]
	v_pk_mul_f32 v[34:35], v[34:35], v[60:61] op_sel_hi:[1,0]
	v_add_f32_e32 v60, v52, v60
	v_exp_f32_e32 v52, v13
	v_exp_f32_e32 v13, v54
	v_sub_f32_e32 v58, v58, v19
	v_mul_f32_e32 v54, v55, v11
	v_exp_f32_e32 v11, v58
	v_sub_f32_e32 v53, v53, v19
	v_pk_add_f32 v[8:9], v[8:9], v[28:29]
	v_pk_add_f32 v[6:7], v[6:7], v[30:31]
	v_pk_add_f32 v[4:5], v[4:5], v[32:33]
	v_pk_add_f32 v[0:1], v[0:1], v[34:35]
	v_exp_f32_e32 v56, v53
	s_waitcnt vmcnt(5)
	v_pk_mul_f32 v[28:29], v[36:37], v[54:55] op_sel_hi:[1,0]
	v_pk_mul_f32 v[30:31], v[38:39], v[54:55] op_sel_hi:[1,0]
	s_waitcnt vmcnt(4)
	v_pk_mul_f32 v[32:33], v[40:41], v[54:55] op_sel_hi:[1,0]
	v_pk_mul_f32 v[34:35], v[42:43], v[54:55] op_sel_hi:[1,0]
	v_mul_f32_e32 v37, v60, v18
	v_pk_mul_f32 v[8:9], v[8:9], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[18:19] op_sel_hi:[1,0]
	v_mul_f32_e32 v36, v57, v13
	v_add_f32_e32 v13, v37, v54
	v_pk_add_f32 v[8:9], v[8:9], v[28:29]
	v_pk_add_f32 v[6:7], v[6:7], v[30:31]
	v_pk_add_f32 v[4:5], v[4:5], v[32:33]
	v_pk_add_f32 v[0:1], v[0:1], v[34:35]
	s_waitcnt vmcnt(0)
	v_pk_mul_f32 v[24:25], v[24:25], v[36:37] op_sel_hi:[1,0]
	v_pk_mul_f32 v[26:27], v[26:27], v[36:37] op_sel_hi:[1,0]
	v_pk_mul_f32 v[20:21], v[20:21], v[36:37] op_sel_hi:[1,0]
	v_pk_mul_f32 v[22:23], v[22:23], v[36:37] op_sel_hi:[1,0]
	v_mul_f32_e32 v18, v59, v11
	v_mul_f32_e32 v11, v13, v52
	v_pk_mul_f32 v[8:9], v[8:9], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[52:53] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[52:53] op_sel_hi:[1,0]
	v_add_f32_e32 v11, v11, v36
	v_pk_add_f32 v[8:9], v[8:9], v[24:25]
	v_pk_add_f32 v[6:7], v[6:7], v[26:27]
	v_pk_add_f32 v[4:5], v[4:5], v[20:21]
	v_pk_add_f32 v[0:1], v[0:1], v[22:23]
	v_pk_mul_f32 v[28:29], v[44:45], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[30:31], v[46:47], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[32:33], v[48:49], v[18:19] op_sel_hi:[1,0]
	v_pk_mul_f32 v[34:35], v[50:51], v[18:19] op_sel_hi:[1,0]
	v_mul_f32_e32 v11, v11, v56
	v_pk_mul_f32 v[8:9], v[8:9], v[56:57] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[56:57] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[56:57] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[56:57] op_sel_hi:[1,0]
	v_add_f32_e32 v18, v11, v18
	v_pk_add_f32 v[8:9], v[8:9], v[28:29]
	v_pk_add_f32 v[6:7], v[6:7], v[30:31]
	v_pk_add_f32 v[4:5], v[4:5], v[32:33]
	v_pk_add_f32 v[0:1], v[0:1], v[34:35]
	s_cbranch_scc1 .LBB0_3
	s_cmp_lg_u32 s20, 0
	s_cselect_b64 s[10:11], -1, 0
	s_and_b64 vcc, exec, s[10:11]
	s_cbranch_vccnz .LBB0_7
	s_branch .LBB0_9
.LBB0_5:
	v_mov_b32_e32 v0, 0
	v_mov_b32_e32 v1, v0
	v_mov_b32_e32 v4, v0
	v_mov_b32_e32 v5, v0
	v_mov_b32_e32 v6, v0
	v_mov_b32_e32 v7, v0
	v_mov_b32_e32 v8, v0
	v_mov_b32_e32 v9, v0
	s_branch .LBB0_9
.LBB0_6:
	v_mov_b32_e32 v0, 0
	v_mov_b32_e32 v1, v0
	s_mov_b32 s21, 0
	v_mov_b32_e32 v19, 0xff800000
	v_mov_b64_e32 v[4:5], v[0:1]
	v_mov_b64_e32 v[6:7], v[0:1]
	v_mov_b64_e32 v[8:9], v[0:1]
	v_mov_b32_e32 v18, v0
	s_cbranch_execz .LBB0_9
.LBB0_7:
	s_add_u32 s0, s0, s21
	s_addc_u32 s1, s1, 0
	s_lshl_b64 s[10:11], s[0:1], 13
	v_lshl_or_b32 v11, v2, 9, s10
	s_lshl_b64 s[0:1], s[0:1], 7
	v_mov_b32_e32 v13, s11
	v_or_b32_e32 v12, v11, v12
	s_add_u32 s0, s8, s0
	v_lshl_add_u64 v[12:13], s[6:7], 0, v[12:13]
	v_mov_b32_e32 v11, 0
	s_addc_u32 s1, s9, s1
	v_lshl_add_u64 v[12:13], v[12:13], 0, 16
	v_lshl_add_u64 v[10:11], s[0:1], 0, v[10:11]
	s_lshl_b32 s8, s20, 6
	s_mov_b64 s[0:1], 0x2000
	s_mov_b64 s[6:7], 0x80
	.p2align	5, , 4
.LBB0_8:
	global_load_dwordx2 v[24:25], v[10:11], off
	global_load_dwordx4 v[14:17], v[12:13], off offset:-16
	global_load_dwordx4 v[20:23], v[12:13], off
	v_max_f32_e32 v26, v19, v19
	s_sub_i32 s8, s8, 64
	v_lshl_add_u64 v[12:13], v[12:13], 0, s[0:1]
	v_lshl_add_u64 v[10:11], v[10:11], 0, s[6:7]
	s_cmp_lg_u32 s8, 0
	s_waitcnt vmcnt(2)
	v_max_f32_e32 v27, v24, v24
	v_max_f32_e32 v26, v26, v27
	v_sub_f32_e32 v24, v24, v26
	v_sub_f32_e32 v27, v19, v26
	v_mov_b32_e32 v19, v26
	v_exp_f32_e32 v26, v24
	v_exp_f32_e32 v24, v27
	v_mul_f32_e32 v26, v25, v26
	v_pk_mul_f32 v[8:9], v[8:9], v[24:25] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[24:25] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[24:25] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[24:25] op_sel_hi:[1,0]
	v_mul_f32_e32 v18, v18, v24
	s_waitcnt vmcnt(1)
	v_pk_mul_f32 v[14:15], v[14:15], v[26:27] op_sel_hi:[1,0]
	v_pk_mul_f32 v[16:17], v[16:17], v[26:27] op_sel_hi:[1,0]
	s_waitcnt vmcnt(0)
	v_pk_mul_f32 v[20:21], v[20:21], v[26:27] op_sel_hi:[1,0]
	v_pk_mul_f32 v[22:23], v[22:23], v[26:27] op_sel_hi:[1,0]
	v_add_f32_e32 v18, v18, v26
	v_pk_add_f32 v[8:9], v[8:9], v[14:15]
	v_pk_add_f32 v[6:7], v[6:7], v[16:17]
	v_pk_add_f32 v[4:5], v[4:5], v[20:21]
	v_pk_add_f32 v[0:1], v[0:1], v[22:23]
	s_cbranch_scc1 .LBB0_8
.LBB0_9:
	v_div_scale_f32 v12, s[0:1], v18, v18, 1.0
	v_rcp_f32_e32 v13, v12
	v_div_scale_f32 v14, vcc, 1.0, v18, 1.0
	s_lshl_b64 s[0:1], s[2:3], 11
	v_lshlrev_b32_e32 v2, 7, v2
	v_fma_f32 v15, -v12, v13, 1.0
	v_fmac_f32_e32 v13, v15, v13
	v_mul_f32_e32 v15, v14, v13
	v_fma_f32 v16, -v12, v15, v14
	v_fmac_f32_e32 v15, v16, v13
	v_fma_f32 v12, -v12, v15, v14
	v_div_fmas_f32 v12, v12, v13, v15
	v_div_fixup_f32 v12, v12, v18, 1.0
	v_cmp_lt_f32_e32 vcc, 0, v18
	v_mov_b32_e32 v10, s4
	v_mov_b32_e32 v11, s5
	v_cndmask_b32_e32 v12, 0, v12, vcc
	v_or3_b32 v14, s0, v2, v3
	v_mov_b32_e32 v15, s1
	v_pk_mul_f32 v[8:9], v[8:9], v[12:13] op_sel_hi:[1,0]
	v_pk_mul_f32 v[6:7], v[6:7], v[12:13] op_sel_hi:[1,0]
	v_pk_mul_f32 v[4:5], v[4:5], v[12:13] op_sel_hi:[1,0]
	v_pk_mul_f32 v[0:1], v[0:1], v[12:13] op_sel_hi:[1,0]
	v_cvt_pk_bf16_f32 v2, v4, v5
	v_cvt_pk_bf16_f32 v3, v0, v1
	v_cvt_pk_bf16_f32 v1, v6, v7
	v_cvt_pk_bf16_f32 v0, v8, v9
	v_lshl_add_u64 v[4:5], v[14:15], 1, v[10:11]
	global_store_dwordx4 v[4:5], v[0:3], off
	s_endpgm
.Lfunc_end0:
	.size	pa_decode_merge_kernel_0, .Lfunc_end0-pa_decode_merge_kernel_0
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel pa_decode_merge_kernel_0
		.amdhsa_group_segment_fixed_size 0
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 44
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 64
		.amdhsa_next_free_sgpr 26
		.amdhsa_accum_offset 64
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.text

	.set .Lpa_decode_merge_kernel_0.num_vgpr, 64
	.set .Lpa_decode_merge_kernel_0.num_agpr, 0
	.set .Lpa_decode_merge_kernel_0.numbered_sgpr, 26
	.set .Lpa_decode_merge_kernel_0.num_named_barrier, 0
	.set .Lpa_decode_merge_kernel_0.private_seg_size, 0
	.set .Lpa_decode_merge_kernel_0.uses_vcc, 1
	.set .Lpa_decode_merge_kernel_0.uses_flat_scratch, 0
	.set .Lpa_decode_merge_kernel_0.has_dyn_sized_stack, 0
	.set .Lpa_decode_merge_kernel_0.has_recursion, 0
	.set .Lpa_decode_merge_kernel_0.has_indirect_call, 0
	.p2alignl 6, 3212836864
	.fill 256, 4, 3212836864
	.section	.AMDGPU.gpr_maximums,"",@progbits
	.set amdgpu.max_num_vgpr, 0
	.set amdgpu.max_num_agpr, 0
	.set amdgpu.max_num_sgpr, 0
	.set amdgpu.max_num_named_barrier, 0
	.text
	.section	".note.GNU-stack","",@progbits
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .offset:         0
        .size:           8
        .value_kind:     by_value
      - .offset:         8
        .size:           8
        .value_kind:     by_value
      - .offset:         16
        .size:           8
        .value_kind:     by_value
      - .offset:         24
        .size:           8
        .value_kind:     by_value
      - .offset:         32
        .size:           4
        .value_kind:     by_value
      - .offset:         36
        .size:           4
        .value_kind:     by_value
      - .offset:         40
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 44
    .max_flat_workgroup_size: 256
    .name:           pa_decode_merge_kernel_0
    .private_segment_fixed_size: 0
    .reqd_workgroup_size:
      - 256
      - 1
      - 1
    .sgpr_count:     32
    .sgpr_spill_count: 0
    .symbol:         pa_decode_merge_kernel_0.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     64
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa-unknown-gfx950
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
