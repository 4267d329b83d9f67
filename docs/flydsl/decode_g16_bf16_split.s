	.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
	.amdhsa_code_object_version 6
	.text
	.globl	pa_decode_mxfp4_kernel_0
	.p2align	8
	.type	pa_decode_mxfp4_kernel_0,@function
pa_decode_mxfp4_kernel_0:
	s_load_dwordx8 s[40:47], s[0:1], 0x8
	s_load_dwordx2 s[6:7], s[0:1], 0x28
	s_load_dwordx4 s[48:51], s[0:1], 0x48
	s_mov_b32 s4, s3
	s_ashr_i32 s3, s2, 31
	s_lshl_b64 s[8:9], s[2:3], 2
	s_waitcnt lgkmcnt(0)
	s_add_u32 s6, s6, s8
	s_addc_u32 s7, s7, s9
	s_load_dword s5, s[6:7], 0x0
	s_abs_i32 s6, s50
	v_cvt_f32_u32_e32 v1, s6
	s_lshl_b32 s7, s48, 7
	s_sub_i32 s11, 0, s6
	s_waitcnt lgkmcnt(0)
	s_min_i32 s5, s5, s7
	v_rcp_f32_e32 v1, v1
	s_max_i32 s5, s5, 0
	s_add_i32 s7, s50, s5
	s_add_i32 s7, s7, -1
	v_mul_f32_e32 v1, 0x4f7ffffe, v1
	v_cvt_u32_f32_e32 v1, v1
	s_abs_i32 s9, s7
	s_xor_b32 s8, s7, s50
	s_ashr_i32 s10, s8, 31
	v_readfirstlane_b32 s12, v1
	s_mul_i32 s11, s11, s12
	s_mul_hi_u32 s11, s12, s11
	s_add_i32 s12, s12, s11
	s_mul_hi_u32 s11, s9, s12
	s_mul_i32 s12, s11, s6
	s_sub_i32 s9, s9, s12
	s_add_i32 s12, s11, 1
	s_sub_i32 s13, s9, s6
	s_cmp_ge_u32 s9, s6
	s_cselect_b32 s11, s12, s11
	s_cselect_b32 s9, s13, s9
	s_add_i32 s12, s11, 1
	s_cmp_ge_u32 s9, s6
	s_cselect_b32 s6, s12, s11
	s_xor_b32 s11, s6, s10
	s_sub_i32 s6, s11, s10
	s_mul_i32 s6, s6, s50
	s_cmp_lg_u32 s7, s6
	s_cselect_b64 s[6:7], -1, 0
	s_cmp_lt_i32 s8, 0
	s_cselect_b64 s[8:9], -1, 0
	s_and_b64 s[6:7], s[6:7], s[8:9]
	s_subb_u32 s6, s11, s10
	s_add_i32 s8, s6, 0xff
	s_ashr_i32 s6, s8, 31
	s_lshr_b32 s6, s6, 24
	s_add_i32 s6, s8, s6
	s_ashr_i32 s10, s6, 8
	s_and_b32 s6, s6, 0xffffff00
	s_cmp_lg_u32 s8, s6
	s_cselect_b64 s[6:7], -1, 0
	s_cmp_lt_i32 s8, 0
	s_cselect_b64 s[8:9], -1, 0
	s_and_b64 s[6:7], s[8:9], s[6:7]
	v_and_b32_e32 v69, 15, v0
	s_subb_u32 s8, s10, 0
	s_lshl_b64 s[6:7], s[2:3], 11
	v_lshlrev_b32_e32 v1, 7, v69
	v_and_b32_e32 v113, 48, v0
	v_mov_b32_e32 v2, s40
	v_mov_b32_e32 v3, s41
	v_or3_b32 v4, s6, v1, v113
	v_mov_b32_e32 v5, s7
	v_lshl_add_u64 v[6:7], v[4:5], 1, v[2:3]
	global_load_dwordx4 v[2:5], v[6:7], off offset:16
	global_load_dwordx4 v[8:11], v[6:7], off
	global_load_dwordx4 v[16:19], v[6:7], off offset:128
	global_load_dwordx4 v[34:37], v[6:7], off offset:144
	s_lshl_b32 s3, s8, 8
	s_max_i32 s3, s3, 0x100
	s_min_i32 s3, s49, s3
	s_mul_i32 s8, s3, s4
	s_add_i32 s3, s8, s3
	s_min_i32 s3, s5, s3
	s_sub_i32 s5, s3, s8
	s_max_i32 s5, s5, 0
	s_add_i32 s5, s5, 63
	v_lshrrev_b32_e32 v115, 6, v0
	s_ashr_i32 s5, s5, 6
	v_cmp_le_i32_e32 vcc, s5, v115
	v_mov_b32_e32 v63, 0
	v_bfe_u32 v112, v0, 4, 2
	v_mul_u32_u24_e32 v114, 0x4400, v115
	v_mov_b32_e32 v117, 0
	s_waitcnt vmcnt(3)
	v_and_b32_e32 v6, 0xffff0000, v4
	v_lshlrev_b32_e32 v20, 16, v4
	v_and_b32_e32 v4, 0xffff0000, v2
	v_lshlrev_b32_e32 v26, 16, v2
	s_waitcnt vmcnt(2)
	v_and_b32_e32 v2, 0xffff0000, v8
	v_lshlrev_b32_e32 v32, 16, v8
	v_and_b32_e32 v7, 0xffff0000, v5
	v_lshlrev_b32_e32 v21, 16, v5
	v_and_b32_e32 v5, 0xffff0000, v3
	v_lshlrev_b32_e32 v27, 16, v3
	v_and_b32_e32 v3, 0xffff0000, v9
	v_lshlrev_b32_e32 v33, 16, v9
	v_max3_f32 v1, |v32|, 0, |v2|
	v_and_b32_e32 v28, 0xffff0000, v10
	v_lshlrev_b32_e32 v30, 16, v10
	v_max3_f32 v1, v1, |v33|, |v3|
	v_and_b32_e32 v29, 0xffff0000, v11
	v_lshlrev_b32_e32 v31, 16, v11
	v_max3_f32 v1, v1, |v30|, |v28|
	v_max3_f32 v1, v1, |v31|, |v29|
	v_max3_f32 v1, v1, |v26|, |v4|
	v_max3_f32 v1, v1, |v27|, |v5|
	v_max3_f32 v1, v1, |v20|, |v6|
	s_waitcnt vmcnt(1)
	v_and_b32_e32 v22, 0xffff0000, v16
	v_lshlrev_b32_e32 v24, 16, v16
	v_max3_f32 v1, v1, |v21|, |v7|
	v_and_b32_e32 v23, 0xffff0000, v17
	v_lshlrev_b32_e32 v25, 16, v17
	v_max3_f32 v1, v1, |v24|, |v22|
	v_and_b32_e32 v14, 0xffff0000, v18
	v_lshlrev_b32_e32 v18, 16, v18
	v_max3_f32 v1, v1, |v25|, |v23|
	v_and_b32_e32 v15, 0xffff0000, v19
	v_lshlrev_b32_e32 v19, 16, v19
	v_max3_f32 v1, v1, |v18|, |v14|
	s_waitcnt vmcnt(0)
	v_and_b32_e32 v8, 0xffff0000, v34
	v_lshlrev_b32_e32 v16, 16, v34
	v_max3_f32 v1, v1, |v19|, |v15|
	v_and_b32_e32 v9, 0xffff0000, v35
	v_lshlrev_b32_e32 v17, 16, v35
	v_max3_f32 v1, v1, |v16|, |v8|
	v_and_b32_e32 v10, 0xffff0000, v36
	v_lshlrev_b32_e32 v12, 16, v36
	v_max3_f32 v1, v1, |v17|, |v9|
	v_and_b32_e32 v11, 0xffff0000, v37
	v_lshlrev_b32_e32 v13, 16, v37
	v_max3_f32 v1, v1, |v12|, |v10|
	v_max3_f32 v1, v1, |v13|, |v11|
	v_mov_b32_e32 v34, v1
	v_mov_b32_e32 v35, v1
	s_nop 1
	v_permlane16_swap_b32_e32 v34, v35
	v_cmp_eq_u32_e64 s[6:7], v34, v1
	s_nop 1
	v_cndmask_b32_e64 v34, v34, v35, s[6:7]
	v_max_f32_e32 v34, v34, v34
	v_max_f32_e32 v1, v1, v34
	v_mov_b32_e32 v34, v1
	v_mov_b32_e32 v35, v1
	s_and_b64 s[6:7], vcc, exec
	s_nop 0
	v_permlane32_swap_b32_e32 v34, v35
	s_cbranch_scc1 .LBB0_4
	v_cmp_eq_u32_e32 vcc, v34, v1
	v_max_f32_e32 v1, v1, v1
	v_and_b32_e32 v116, 60, v0
	v_cndmask_b32_e32 v34, v34, v35, vcc
	v_max_f32_e32 v34, v34, v34
	v_max_f32_e32 v1, v1, v34
	v_mul_f32_e32 v34, 0x3b124925, v1
	v_cmp_lt_f32_e32 vcc, 0, v1
	s_mul_hi_i32 s33, s48, s2
	s_mul_i32 s40, s48, s2
	v_cndmask_b32_e32 v1, 1.0, v34, vcc
	v_div_scale_f32 v34, s[6:7], v1, v1, 1.0
	v_rcp_f32_e32 v35, v34
	s_load_dword s6, s[0:1], 0x58
	v_mov_b32_e32 v71, v63
	v_mov_b32_e32 v73, v63
	v_fma_f32 v36, -v34, v35, 1.0
	v_fmac_f32_e32 v35, v36, v35
	v_div_scale_f32 v36, vcc, 1.0, v1, 1.0
	v_mul_f32_e32 v37, v36, v35
	v_fma_f32 v38, -v34, v37, v36
	v_fmac_f32_e32 v37, v38, v35
	v_fma_f32 v34, -v34, v37, v36
	v_div_fmas_f32 v34, v34, v35, v37
	v_div_fixup_f32 v34, v34, v1, 1.0
	v_pk_mul_f32 v[38:39], v[34:35], v[4:5] op_sel_hi:[0,1]
	v_pk_mul_f32 v[20:21], v[34:35], v[20:21] op_sel_hi:[0,1]
	v_pk_mul_f32 v[6:7], v[34:35], v[6:7] op_sel_hi:[0,1]
	v_mov_b32_e32 v5, 0
	v_cvt_pk_fp8_f32 v5, v20, v6
	v_pk_mul_f32 v[32:33], v[34:35], v[32:33] op_sel_hi:[0,1]
	v_pk_mul_f32 v[36:37], v[34:35], v[2:3] op_sel_hi:[0,1]
	v_pk_mul_f32 v[30:31], v[34:35], v[30:31] op_sel_hi:[0,1]
	v_pk_mul_f32 v[28:29], v[34:35], v[28:29] op_sel_hi:[0,1]
	v_pk_mul_f32 v[26:27], v[34:35], v[26:27] op_sel_hi:[0,1]
	v_cvt_pk_fp8_f32 v5, v21, v7 op_sel:[0,0,1]
	v_pk_mul_f32 v[20:21], v[34:35], v[24:25] op_sel_hi:[0,1]
	v_pk_mul_f32 v[22:23], v[34:35], v[22:23] op_sel_hi:[0,1]
	v_pk_mul_f32 v[18:19], v[34:35], v[18:19] op_sel_hi:[0,1]
	v_pk_mul_f32 v[14:15], v[34:35], v[14:15] op_sel_hi:[0,1]
	v_pk_mul_f32 v[16:17], v[34:35], v[16:17] op_sel_hi:[0,1]
	v_pk_mul_f32 v[24:25], v[34:35], v[8:9] op_sel_hi:[0,1]
	v_pk_mul_f32 v[12:13], v[34:35], v[12:13] op_sel_hi:[0,1]
	v_pk_mul_f32 v[10:11], v[34:35], v[10:11] op_sel_hi:[0,1]
	v_and_b32_e32 v34, 64, v0
	v_mov_b32_e32 v6, 0
	v_sub_u32_e32 v34, s8, v34
	v_mov_b32_e32 v2, 0
	v_mov_b32_e32 v3, 0
	v_mov_b32_e32 v4, 0
	v_cvt_pk_fp8_f32 v6, v20, v22
	v_mov_b32_e32 v7, 0
	v_mov_b32_e32 v8, 0
	v_mov_b32_e32 v9, 0
	v_and_b32_e32 v34, 0x7f, v34
	v_cvt_pk_fp8_f32 v2, v32, v36
	v_cvt_pk_fp8_f32 v3, v30, v28
	v_cvt_pk_fp8_f32 v4, v26, v38
	v_cvt_pk_fp8_f32 v7, v18, v14
	v_cvt_pk_fp8_f32 v8, v16, v24
	v_cvt_pk_fp8_f32 v9, v12, v10
	v_add_u32_e32 v35, v34, v69
	v_add_u32_e32 v36, 16, v35
	v_mul_f32_e32 v1, s51, v1
	v_and_b32_e32 v22, 3, v0
	v_lshl_or_b32 v62, v35, 6, v113
	v_lshl_or_b32 v70, v35, 2, v112
	v_lshl_or_b32 v72, v36, 6, v113
	v_lshl_or_b32 v74, v36, 2, v112
	v_add_u32_e32 v36, 32, v35
	v_add_u32_e32 v35, 48, v35
	v_add_u32_e32 v34, v34, v116
	v_cvt_pk_fp8_f32 v6, v21, v23 op_sel:[0,0,1]
	s_waitcnt lgkmcnt(0)
	v_mul_f32_e32 v64, s6, v1
	v_lshlrev_b32_e32 v23, 4, v22
	s_movk_i32 s6, 0x1100
	v_lshl_or_b32 v80, v35, 6, v113
	v_lshl_or_b32 v82, v35, 2, v112
	v_add_u32_e32 v35, 1, v34
	v_cvt_pk_fp8_f32 v2, v33, v37 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v3, v31, v29 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v4, v27, v39 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v7, v19, v15 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v8, v17, v25 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v9, v13, v11 op_sel:[0,0,1]
	v_lshlrev_b32_e32 v10, 2, v112
	v_mad_u32_u24 v25, v22, s6, v114
	s_movk_i32 s6, 0x88
	v_lshl_or_b32 v84, v34, 6, v23
	v_lshl_or_b32 v86, v34, 2, v22
	v_lshl_or_b32 v88, v35, 6, v23
	v_lshl_or_b32 v90, v35, 2, v22
	v_add_u32_e32 v35, 2, v34
	v_add_u32_e32 v34, 3, v34
	v_or_b32_e32 v16, 16, v10
	v_or_b32_e32 v20, 32, v10
	v_or_b32_e32 v66, 48, v10
	v_lshlrev_b32_e32 v24, 1, v0
	v_mad_u32_u24 v27, v69, s6, v114
	v_lshl_or_b32 v94, v35, 2, v22
	v_lshl_or_b32 v98, v34, 2, v22
	v_and_b32_e32 v22, 0xc0, v0
	v_and_b32_e32 v24, 0x78, v24
	v_lshlrev_b32_e32 v26, 3, v112
	v_lshlrev_b32_e32 v28, 1, v16
	v_add_u32_e32 v29, 0x880, v27
	v_add_u32_e32 v30, 0x1100, v27
	v_add_u32_e32 v31, 0x1980, v27
	v_lshlrev_b32_e32 v32, 1, v20
	v_lshlrev_b32_e32 v33, 1, v66
	v_lshl_or_b32 v92, v35, 6, v23
	v_lshl_or_b32 v96, v34, 6, v23
	v_add_u32_e32 v23, s8, v22
	v_mov_b32_e32 v22, 0
	v_or_b32_e32 v1, 1, v10
	v_or_b32_e32 v11, 3, v10
	v_or_b32_e32 v12, 2, v10
	v_or_b32_e32 v13, 19, v10
	v_or_b32_e32 v14, 18, v10
	v_or_b32_e32 v15, 17, v10
	v_or_b32_e32 v17, 35, v10
	v_or_b32_e32 v18, 34, v10
	v_or_b32_e32 v19, 33, v10
	v_or_b32_e32 v21, 49, v10
	v_or_b32_e32 v67, 51, v10
	v_or_b32_e32 v68, 50, v10
	v_mov_b32_e32 v75, v63
	v_lshl_or_b32 v76, v36, 6, v113
	v_mov_b32_e32 v77, v63
	v_lshl_or_b32 v78, v36, 2, v112
	v_mov_b32_e32 v79, v63
	v_mov_b32_e32 v81, v63
	v_mov_b32_e32 v83, v63
	v_mov_b32_e32 v85, v63
	v_mov_b32_e32 v87, v63
	v_mov_b32_e32 v89, v63
	v_mov_b32_e32 v91, v63
	v_mov_b32_e32 v93, v63
	v_mov_b32_e32 v95, v63
	v_mov_b32_e32 v97, v63
	v_mov_b32_e32 v99, v63
	s_mov_b32 s41, s3
	s_mov_b32 s48, s3
	s_mov_b32 s49, s3
	s_mov_b32 s51, s3
	s_mov_b32 s52, s3
	s_mov_b32 s53, s3
	s_mov_b32 s54, s3
	v_mov_b32_e32 v65, v64
	v_mov_b32_e32 v100, v64
	v_mov_b32_e32 v101, v64
	v_mov_b32_e32 v102, v64
	v_mov_b32_e32 v103, v64
	v_mov_b32_e32 v104, v64
	v_mov_b32_e32 v105, v64
	s_mov_b32 s55, s3
	s_mov_b32 s56, s3
	s_mov_b32 s57, s3
	s_mov_b32 s58, s3
	v_mov_b32_e32 v106, v64
	v_mov_b32_e32 v107, v64
	v_mov_b32_e32 v108, v64
	v_mov_b32_e32 v109, v64
	s_mov_b32 s59, s3
	s_mov_b32 s60, s3
	v_mov_b32_e32 v110, v64
	v_mov_b32_e32 v111, v64
	v_readfirstlane_b32 s61, v23
	v_mov_b32_e32 v137, 0xff800000
	s_movk_i32 s62, 0x2000
	v_mov_b32_e32 v118, 0x7f
	v_mov_b32_e32 v119, 0xff800000
	s_mov_b32 s63, 0x5040100
	v_add_u32_e32 v120, v25, v24
	s_mov_b32 s64, 0x7060302
	v_add_u32_e32 v121, v27, v26
	v_add_u32_e32 v122, v27, v28
	v_add_u32_e32 v123, v29, v26
	v_add_u32_e32 v124, v29, v28
	v_add_u32_e32 v125, v30, v26
	v_add_u32_e32 v126, v30, v28
	v_add_u32_e32 v127, v31, v26
	v_add_u32_e32 v128, v31, v28
	v_add_u32_e32 v129, v27, v32
	v_add_u32_e32 v130, v27, v33
	v_add_u32_e32 v131, v29, v32
	v_add_u32_e32 v132, v29, v33
	v_add_u32_e32 v133, v30, v32
	v_add_u32_e32 v134, v30, v33
	v_add_u32_e32 v135, v31, v32
	v_add_u32_e32 v136, v31, v33
	v_mov_b32_e32 v117, v63
	v_mov_b32_e32 v23, v22
	v_mov_b32_e32 v24, v22
	v_mov_b32_e32 v25, v22
	v_mov_b32_e32 v26, v22
	v_mov_b32_e32 v27, v22
	v_mov_b32_e32 v28, v22
	v_mov_b32_e32 v29, v22
	v_mov_b32_e32 v30, v22
	v_mov_b32_e32 v31, v22
	v_mov_b32_e32 v32, v22
	v_mov_b32_e32 v33, v22
	v_mov_b32_e32 v34, v22
	v_mov_b32_e32 v35, v22
	v_mov_b32_e32 v36, v22
	v_mov_b32_e32 v37, v22
	v_mov_b32_e32 v38, v22
	v_mov_b32_e32 v39, v22
	v_mov_b32_e32 v40, v22
	v_mov_b32_e32 v41, v22
	v_mov_b32_e32 v42, v22
	v_mov_b32_e32 v43, v22
	v_mov_b32_e32 v44, v22
	v_mov_b32_e32 v45, v22
	v_mov_b32_e32 v46, v22
	v_mov_b32_e32 v47, v22
	v_mov_b32_e32 v48, v22
	v_mov_b32_e32 v49, v22
	v_mov_b32_e32 v50, v22
	v_mov_b32_e32 v51, v22
	v_mov_b32_e32 v52, v22
	v_mov_b32_e32 v53, v22
.LBB0_2:
	s_ashr_i32 s6, s61, 7
	s_ashr_i32 s7, s6, 31
	s_add_u32 s6, s40, s6
	s_addc_u32 s7, s33, s7
	s_lshl_b64 s[6:7], s[6:7], 2
	s_add_u32 s6, s46, s6
	s_addc_u32 s7, s47, s7
	s_load_dword s6, s[6:7], 0x0
	v_add_u32_e32 v172, s61, v116
	v_add_u32_e32 v174, 2, v172
	v_add_u32_e32 v173, 1, v172
	v_add_u32_e32 v175, 3, v172
	s_waitcnt lgkmcnt(0)
	s_mul_i32 s9, s6, 0x2200
	s_mul_hi_i32 s8, s6, 0x2200
	s_add_u32 s6, s42, s9
	s_addc_u32 s7, s43, s8
	v_lshl_add_u64 v[56:57], s[6:7], 0, v[70:71]
	v_add_co_u32_e32 v56, vcc, s62, v56
	v_lshl_add_u64 v[58:59], s[6:7], 0, v[72:73]
	v_lshl_add_u64 v[60:61], s[6:7], 0, v[74:75]
	v_lshl_add_u64 v[154:155], s[6:7], 0, v[76:77]
	v_addc_co_u32_e32 v57, vcc, 0, v57, vcc
	global_load_dwordx4 v[186:189], v[58:59], off
	global_load_dwordx4 v[190:193], v[154:155], off
	v_add_co_u32_e32 v58, vcc, s62, v60
	v_lshl_add_u64 v[156:157], s[6:7], 0, v[78:79]
	s_nop 0
	v_addc_co_u32_e32 v59, vcc, 0, v61, vcc
	v_add_co_u32_e32 v60, vcc, s62, v156
	v_lshl_add_u64 v[54:55], s[6:7], 0, v[62:63]
	v_lshl_add_u64 v[158:159], s[6:7], 0, v[80:81]
	v_lshl_add_u64 v[160:161], s[6:7], 0, v[82:83]
	s_add_u32 s6, s44, s9
	v_addc_co_u32_e32 v61, vcc, 0, v157, vcc
	v_add_co_u32_e32 v162, vcc, s62, v160
	s_addc_u32 s7, s45, s8
	s_nop 0
	v_addc_co_u32_e32 v163, vcc, 0, v161, vcc
	global_load_dwordx4 v[198:201], v[54:55], off
	global_load_ubyte v176, v[56:57], off
	global_load_ubyte v177, v[58:59], off
	global_load_ubyte v185, v[60:61], off
	v_lshl_add_u64 v[58:59], s[6:7], 0, v[86:87]
	v_add_co_u32_e32 v166, vcc, s62, v58
	v_lshl_add_u64 v[154:155], s[6:7], 0, v[90:91]
	s_nop 0
	v_addc_co_u32_e32 v167, vcc, 0, v59, vcc
	v_add_co_u32_e32 v168, vcc, s62, v154
	global_load_dwordx4 v[194:197], v[158:159], off
	s_nop 0
	v_addc_co_u32_e32 v169, vcc, 0, v155, vcc
	global_load_ubyte v162, v[162:163], off
	v_lshl_add_u64 v[158:159], s[6:7], 0, v[94:95]
	v_add_co_u32_e32 v170, vcc, s62, v158
	v_lshl_add_u64 v[164:165], s[6:7], 0, v[98:99]
	s_nop 0
	v_addc_co_u32_e32 v171, vcc, 0, v159, vcc
	v_add_co_u32_e32 v164, vcc, s62, v164
	v_lshl_add_u64 v[156:157], s[6:7], 0, v[92:93]
	s_nop 0
	v_addc_co_u32_e32 v165, vcc, 0, v165, vcc
	v_lshl_add_u64 v[54:55], s[6:7], 0, v[84:85]
	v_lshl_add_u64 v[60:61], s[6:7], 0, v[88:89]
	v_lshl_add_u64 v[160:161], s[6:7], 0, v[96:97]
	global_load_dwordx4 v[154:157], v[156:157], off
	s_nop 0
	global_load_ubyte v164, v[164:165], off
	s_nop 0
	global_load_ubyte v165, v[170:171], off
	s_nop 0
	global_load_ubyte v168, v[168:169], off
	s_nop 0
	global_load_ubyte v166, v[166:167], off
	v_cmp_gt_i32_e64 s[6:7], s3, v174
	global_load_dwordx4 v[54:57], v[54:55], off
	v_cmp_gt_i32_e32 vcc, s3, v173
	global_load_dwordx4 v[58:61], v[60:61], off
	v_cmp_gt_i32_e64 s[8:9], s3, v175
	global_load_dwordx4 v[158:161], v[160:161], off
	v_cmp_gt_i32_e64 s[10:11], s3, v172
	v_add_u32_e32 v184, 0x800, v120
	v_add_u32_e32 v144, s61, v10
	v_add_u32_e32 v145, s61, v1
	v_add_u32_e32 v138, s61, v13
	v_add_u32_e32 v139, s61, v14
	v_add_u32_e32 v140, s61, v11
	v_add_u32_e32 v141, s61, v12
	v_add_u32_e32 v142, s61, v15
	v_add_u32_e32 v143, s61, v16
	v_cmp_gt_i32_e64 s[14:15], s48, v141
	v_cmp_gt_i32_e64 s[16:17], s49, v140
	v_cmp_gt_i32_e64 s[18:19], s53, v139
	v_cmp_gt_i32_e64 s[38:39], s54, v138
	v_cmp_gt_i32_e64 s[12:13], s52, v142
	v_add_u32_e32 v148, s61, v19
	v_add_u32_e32 v149, s61, v20
	v_add_u32_e32 v146, s61, v17
	v_add_u32_e32 v147, s61, v18
	v_cmp_gt_i32_e64 s[20:21], s55, v149
	v_cmp_gt_i32_e64 s[22:23], s56, v148
	v_add_u32_e32 v150, s61, v21
	v_add_u32_e32 v151, s61, v66
	v_cmp_gt_i32_e64 s[24:25], s57, v147
	v_cmp_gt_i32_e64 s[26:27], s58, v146
	v_add_u32_e32 v152, s61, v67
	v_add_u32_e32 v153, s61, v68
	v_cmp_gt_i32_e64 s[28:29], s59, v151
	v_cmp_gt_i32_e64 s[30:31], s60, v150
	v_cmp_gt_i32_e64 s[34:35], s59, v153
	v_cmp_gt_i32_e64 s[36:37], s60, v152
	v_add_u32_e32 v163, 0xc00, v120
	v_add_u32_e32 v115, 4, v115
	s_addk_i32 s61, 0x100
	s_waitcnt vmcnt(7)
	v_cndmask_b32_e64 v178, 0, v157, s[6:7]
	v_cndmask_b32_e64 v179, 0, v156, s[6:7]
	v_cndmask_b32_e64 v180, 0, v155, s[6:7]
	v_cndmask_b32_e64 v181, 0, v154, s[6:7]
	s_waitcnt vmcnt(6)
	v_lshlrev_b32_e32 v154, 23, v164
	s_waitcnt vmcnt(5)
	v_lshlrev_b32_e32 v155, 23, v165
	s_waitcnt vmcnt(4)
	v_lshlrev_b32_e32 v156, 23, v168
	s_waitcnt vmcnt(3)
	v_lshlrev_b32_e32 v157, 23, v166
	s_waitcnt vmcnt(2)
	v_cndmask_b32_e64 v171, 0, v54, s[10:11]
	s_waitcnt vmcnt(1)
	v_cndmask_b32_e32 v175, 0, v58, vcc
	s_waitcnt vmcnt(0)
	v_cndmask_b32_e64 v158, 0, v158, s[8:9]
	v_cndmask_b32_e64 v164, 1.0, v157, s[10:11]
	v_cndmask_b32_e32 v165, 1.0, v156, vcc
	v_cndmask_b32_e64 v166, 1.0, v155, s[6:7]
	v_cndmask_b32_e64 v168, 1.0, v154, s[8:9]
	v_cndmask_b32_e32 v172, 0, v61, vcc
	v_cndmask_b32_e32 v173, 0, v60, vcc
	v_cndmask_b32_e32 v174, 0, v59, vcc
	v_mfma_scale_f32_16x16x128_f8f6f4 v[58:61], v[186:189], v[2:9], 0, v177, v118 op_sel_hi:[0,0,0] cbsz:4
	v_cvt_scalef32_pk_bf16_fp4 v156, v171, v164
	v_cvt_scalef32_pk_bf16_fp4 v157, v175, v165
	v_cvt_scalef32_pk_bf16_fp4 v177, v181, v166
	v_cvt_scalef32_pk_bf16_fp4 v182, v158, v168
	v_perm_b32 v154, v157, v156, s63
	v_perm_b32 v155, v182, v177, s63
	v_perm_b32 v156, v157, v156, s64
	v_perm_b32 v157, v182, v177, s64
	v_cndmask_b32_e64 v167, 0, v57, s[10:11]
	v_cndmask_b32_e64 v169, 0, v56, s[10:11]
	v_cndmask_b32_e64 v170, 0, v55, s[10:11]
	v_mfma_scale_f32_16x16x128_f8f6f4 v[54:57], v[198:201], v[2:9], 0, v176, v118 op_sel_hi:[0,0,0] cbsz:4
	v_cvt_scalef32_pk_bf16_fp4 v176, v171, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v182, v175, v165 op_sel:[1,0,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset1:17
	v_cvt_scalef32_pk_bf16_fp4 v157, v181, v166 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v183, v158, v168 op_sel:[1,0,0]
	v_perm_b32 v154, v182, v176, s63
	v_perm_b32 v155, v183, v157, s63
	v_perm_b32 v156, v182, v176, s64
	v_perm_b32 v157, v183, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v177, v171, v164 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v182, v175, v165 op_sel:[0,1,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:34 offset1:51
	v_cvt_scalef32_pk_bf16_fp4 v157, v181, v166 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v183, v158, v168 op_sel:[0,1,0]
	v_perm_b32 v154, v182, v177, s63
	v_perm_b32 v155, v183, v157, s63
	v_perm_b32 v156, v182, v177, s64
	v_perm_b32 v157, v183, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v171, v171, v164 op_sel:[1,1,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:68 offset1:85
	v_cvt_scalef32_pk_bf16_fp4 v156, v175, v165 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v157, v181, v166 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v158, v158, v168 op_sel:[1,1,0]
	v_cndmask_b32_e64 v159, 0, v159, s[8:9]
	v_perm_b32 v154, v156, v171, s63
	v_perm_b32 v155, v158, v157, s63
	v_perm_b32 v156, v156, v171, s64
	v_perm_b32 v157, v158, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v176, v170, v164
	v_cvt_scalef32_pk_bf16_fp4 v158, v174, v165
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:102 offset1:119
	v_cvt_scalef32_pk_bf16_fp4 v157, v180, v166
	v_cvt_scalef32_pk_bf16_fp4 v175, v159, v168
	v_perm_b32 v154, v158, v176, s63
	v_perm_b32 v155, v175, v157, s63
	v_perm_b32 v156, v158, v176, s64
	v_perm_b32 v157, v175, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v177, v170, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v158, v174, v165 op_sel:[1,0,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:136 offset1:153
	v_cvt_scalef32_pk_bf16_fp4 v157, v180, v166 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v176, v159, v168 op_sel:[1,0,0]
	v_perm_b32 v154, v158, v177, s63
	v_perm_b32 v155, v176, v157, s63
	v_perm_b32 v156, v158, v177, s64
	v_perm_b32 v157, v176, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v182, v170, v164 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v175, v167, v164
	v_cvt_scalef32_pk_bf16_fp4 v176, v167, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v181, v167, v164 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v187, v167, v164 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v158, v174, v165 op_sel:[0,1,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:170 offset1:187
	v_cvt_scalef32_pk_bf16_fp4 v157, v180, v166 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v167, v159, v168 op_sel:[0,1,0]
	v_perm_b32 v154, v158, v182, s63
	v_perm_b32 v155, v167, v157, s63
	v_perm_b32 v156, v158, v182, s64
	v_perm_b32 v157, v167, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v170, v170, v164 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v183, v169, v164
	v_cvt_scalef32_pk_bf16_fp4 v186, v169, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v171, v169, v164 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v169, v169, v164 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v164, v174, v165 op_sel:[1,1,0]
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:204 offset1:221
	v_cvt_scalef32_pk_bf16_fp4 v157, v180, v166 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v159, v159, v168 op_sel:[1,1,0]
	v_cndmask_b32_e64 v160, 0, v160, s[8:9]
	v_perm_b32 v154, v164, v170, s63
	v_perm_b32 v155, v159, v157, s63
	v_perm_b32 v156, v164, v170, s64
	v_perm_b32 v157, v159, v157, s64
	v_cvt_scalef32_pk_bf16_fp4 v158, v173, v165
	v_cvt_scalef32_pk_bf16_fp4 v159, v179, v166
	ds_write2_b64 v120, v[154:155], v[156:157] offset0:238 offset1:255
	v_cvt_scalef32_pk_bf16_fp4 v157, v160, v168
	v_perm_b32 v154, v158, v183, s63
	v_perm_b32 v155, v157, v159, s63
	v_perm_b32 v156, v158, v183, s64
	v_perm_b32 v157, v157, v159, s64
	v_cvt_scalef32_pk_bf16_fp4 v167, v173, v165 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v164, v179, v166 op_sel:[1,0,0]
	ds_write2_b64 v184, v[154:155], v[156:157] offset0:16 offset1:33
	v_cvt_scalef32_pk_bf16_fp4 v157, v160, v168 op_sel:[1,0,0]
	v_cndmask_b32_e64 v161, 0, v161, s[8:9]
	v_perm_b32 v154, v167, v186, s63
	v_perm_b32 v155, v157, v164, s63
	v_perm_b32 v156, v167, v186, s64
	v_perm_b32 v157, v157, v164, s64
	v_cvt_scalef32_pk_bf16_fp4 v174, v173, v165 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v173, v173, v165 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v177, v172, v165
	v_cvt_scalef32_pk_bf16_fp4 v180, v172, v165 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v182, v172, v165 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v188, v172, v165 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v165, v179, v166 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v170, v179, v166 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v172, v178, v166
	v_cvt_scalef32_pk_bf16_fp4 v179, v178, v166 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v183, v178, v166 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v189, v178, v166 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v164, v160, v168 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v167, v160, v168 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v178, v161, v168
	ds_write2_b64 v184, v[154:155], v[156:157] offset0:50 offset1:67
	v_cvt_scalef32_pk_bf16_fp4 v154, v161, v168 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v155, v161, v168 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v156, v161, v168 op_sel:[1,1,0]
	v_perm_b32 v158, v174, v171, s63
	v_perm_b32 v159, v164, v165, s63
	v_perm_b32 v160, v174, v171, s64
	v_perm_b32 v161, v164, v165, s64
	v_perm_b32 v164, v173, v169, s63
	v_perm_b32 v165, v167, v170, s63
	v_perm_b32 v166, v173, v169, s64
	v_perm_b32 v167, v167, v170, s64
	v_perm_b32 v168, v177, v175, s63
	v_perm_b32 v169, v178, v172, s63
	v_perm_b32 v170, v177, v175, s64
	v_perm_b32 v171, v178, v172, s64
	v_perm_b32 v172, v180, v176, s63
	v_perm_b32 v173, v154, v179, s63
	v_perm_b32 v174, v180, v176, s64
	v_perm_b32 v175, v154, v179, s64
	v_perm_b32 v176, v182, v181, s63
	v_perm_b32 v177, v155, v183, s63
	v_perm_b32 v178, v182, v181, s64
	v_perm_b32 v179, v155, v183, s64
	v_perm_b32 v181, v156, v189, s63
	v_perm_b32 v183, v156, v189, s64
	v_mfma_scale_f32_16x16x128_f8f6f4 v[154:157], v[190:193], v[2:9], 0, v185, v118 op_sel_hi:[0,0,0] cbsz:4
	ds_write2_b64 v184, v[158:159], v[160:161] offset0:84 offset1:101
	v_mul_f32_e64 v54, v64, v54
	v_mul_f32_e64 v55, v65, v55
	v_cmp_gt_i32_e64 s[6:7], s41, v145
	v_cmp_gt_i32_e64 s[8:9], s3, v144
	v_pk_mul_f32 v[56:57], v[100:101], v[56:57]
	v_cndmask_b32_e64 v139, v119, v55, s[6:7]
	v_cndmask_b32_e64 v138, v119, v54, s[8:9]
	v_mfma_scale_f32_16x16x128_f8f6f4 v[158:161], v[194:197], v[2:9], 0, v162, v118 op_sel_hi:[0,0,0] cbsz:4
	v_mul_f32_e64 v58, v102, v58
	v_mul_f32_e64 v59, v103, v59
	v_cmp_gt_i32_e64 s[10:11], s51, v143
	v_cndmask_b32_e64 v57, v119, v57, s[16:17]
	v_cndmask_b32_e64 v56, v119, v56, s[14:15]
	v_max_f32_e32 v54, v138, v139
	v_pk_mul_f32 v[60:61], v[104:105], v[60:61]
	v_cndmask_b32_e64 v59, v119, v59, s[12:13]
	v_cndmask_b32_e64 v58, v119, v58, s[10:11]
	v_max3_f32 v54, v54, v56, v57
	v_pk_mul_f32 v[142:143], v[106:107], v[154:155]
	v_cndmask_b32_e64 v61, v119, v61, s[38:39]
	v_cndmask_b32_e64 v60, v119, v60, s[18:19]
	v_max3_f32 v54, v54, v58, v59
	v_pk_mul_f32 v[140:141], v[108:109], v[156:157]
	v_cndmask_b32_e64 v143, v119, v143, s[22:23]
	v_cndmask_b32_e64 v142, v119, v142, s[20:21]
	v_max3_f32 v54, v54, v60, v61
	v_pk_mul_f32 v[144:145], v[110:111], v[158:159]
	v_cndmask_b32_e64 v141, v119, v141, s[26:27]
	v_cndmask_b32_e64 v140, v119, v140, s[24:25]
	v_max3_f32 v54, v54, v142, v143
	v_pk_mul_f32 v[146:147], v[110:111], v[160:161]
	v_cndmask_b32_e64 v145, v119, v145, s[30:31]
	v_cndmask_b32_e64 v144, v119, v144, s[28:29]
	v_max3_f32 v54, v54, v140, v141
	v_cndmask_b32_e64 v147, v119, v147, s[36:37]
	v_cndmask_b32_e64 v146, v119, v146, s[34:35]
	v_max3_f32 v54, v54, v144, v145
	v_max3_f32 v54, v54, v146, v147
	v_mov_b32_e32 v55, v54
	v_mov_b32_e32 v148, v54
	s_nop 1
	v_permlane16_swap_b32_e32 v55, v148
	v_cmp_eq_u32_e64 s[6:7], v55, v54
	v_perm_b32 v180, v188, v187, s63
	v_perm_b32 v182, v188, v187, s64
	v_cndmask_b32_e64 v55, v55, v148, s[6:7]
	v_max_f32_e32 v55, v55, v55
	v_max_f32_e32 v54, v54, v55
	v_mov_b32_e32 v55, v54
	v_mov_b32_e32 v148, v54
	s_nop 1
	v_permlane32_swap_b32_e32 v55, v148
	v_cmp_eq_u32_e64 s[6:7], v55, v54
	ds_write2_b64 v184, v[164:165], v[166:167] offset0:118 offset1:135
	ds_write2_b64 v184, v[168:169], v[170:171] offset0:152 offset1:169
	ds_write2_b64 v184, v[172:173], v[174:175] offset0:186 offset1:203
	ds_write2_b64 v184, v[176:177], v[178:179] offset0:220 offset1:237
	ds_write2_b64 v163, v[180:181], v[182:183] offset0:126 offset1:143
	v_cndmask_b32_e64 v55, v55, v148, s[6:7]
	v_max3_f32 v54, v137, v54, v55
	v_sub_f32_e32 v55, v137, v54
	v_pk_add_f32 v[138:139], v[138:139], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[56:57], v[56:57], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[58:59], v[58:59], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[60:61], v[60:61], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[142:143], v[142:143], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[140:141], v[140:141], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[144:145], v[144:145], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[146:147], v[146:147], v[54:55] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_exp_f32_e32 v148, v55
	v_exp_f32_e32 v55, v138
	v_exp_f32_e32 v138, v139
	v_exp_f32_e32 v139, v56
	ds_read2st64_b64 v[162:165], v121 offset1:17
	ds_read2st64_b64 v[170:173], v122 offset1:17
	ds_read_b64 v[184:185], v125
	ds_read_b64 v[186:187], v126
	ds_read_b64 v[188:189], v127
	ds_read_b64 v[190:191], v128
	ds_read_b64 v[192:193], v121 offset:10880
	ds_read_b64 v[194:195], v122 offset:10880
	ds_read_b64 v[196:197], v121 offset:13056
	ds_read_b64 v[200:201], v121 offset:15232
	ds_read_b64 v[204:205], v123
	ds_read_b64 v[206:207], v124
	ds_read_b64 v[198:199], v122 offset:13056
	ds_read_b64 v[202:203], v122 offset:15232
	ds_read2st64_b64 v[174:177], v129 offset1:17
	ds_read2st64_b64 v[180:183], v130 offset1:17
	ds_read_b64 v[208:209], v131
	ds_read_b64 v[210:211], v132
	ds_read_b64 v[212:213], v133
	ds_read_b64 v[214:215], v134
	s_waitcnt lgkmcnt(14)
	v_mov_b32_e32 v168, v162
	v_mov_b32_e32 v169, v163
	v_exp_f32_e32 v149, v57
	v_exp_f32_e32 v150, v58
	v_exp_f32_e32 v151, v59
	v_exp_f32_e32 v152, v60
	v_exp_f32_e32 v153, v61
	v_cvt_pk_bf16_f32 v56, v55, v138
	v_add_f32_e32 v55, v55, v138
	v_mov_b32_e32 v166, v172
	v_mov_b32_e32 v167, v173
	v_add_f32_e32 v55, v139, v55
	s_waitcnt lgkmcnt(5)
	v_mov_b32_e32 v178, v174
	v_mov_b32_e32 v179, v175
	v_exp_f32_e32 v142, v142
	v_exp_f32_e32 v143, v143
	v_pk_mul_f32 v[24:25], v[24:25], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[22:23], v[22:23], v[148:149] op_sel_hi:[1,0]
	v_cvt_pk_bf16_f32 v59, v152, v153
	v_cvt_pk_bf16_f32 v58, v150, v151
	v_cvt_pk_bf16_f32 v57, v139, v149
	v_exp_f32_e32 v140, v140
	v_exp_f32_e32 v141, v141
	v_exp_f32_e32 v144, v144
	v_exp_f32_e32 v145, v145
	v_exp_f32_e32 v146, v146
	v_exp_f32_e32 v147, v147
	v_add_f32_e32 v55, v149, v55
	v_mfma_f32_16x16x32_bf16 v[22:25], v[168:171], v[56:59], v[22:25]
	v_add_f32_e32 v55, v150, v55
	v_add_f32_e32 v55, v151, v55
	v_pk_mul_f32 v[28:29], v[28:29], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[26:27], v[26:27], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[32:33], v[32:33], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[30:31], v[30:31], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[36:37], v[36:37], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[34:35], v[34:35], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[40:41], v[40:41], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[38:39], v[38:39], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[44:45], v[44:45], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[42:43], v[42:43], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[48:49], v[48:49], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[46:47], v[46:47], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[52:53], v[52:53], v[148:149] op_sel_hi:[1,0]
	v_pk_mul_f32 v[50:51], v[50:51], v[148:149] op_sel_hi:[1,0]
	v_add_f32_e32 v55, v152, v55
	v_mfma_f32_16x16x32_bf16 v[26:29], v[204:207], v[56:59], v[26:29]
	v_cvt_pk_bf16_f32 v61, v146, v147
	v_cvt_pk_bf16_f32 v60, v144, v145
	v_add_f32_e32 v55, v153, v55
	v_mfma_f32_16x16x32_bf16 v[30:33], v[184:187], v[56:59], v[30:33]
	ds_read_b64 v[154:155], v135
	ds_read_b64 v[156:157], v136
	ds_read_b64 v[160:161], v130 offset:15232
	ds_read_b64 v[162:163], v129 offset:13056
	ds_read_b64 v[158:159], v129 offset:15232
	v_add_f32_e32 v55, v142, v55
	v_mfma_f32_16x16x32_bf16 v[34:37], v[188:191], v[56:59], v[34:37]
	v_add_f32_e32 v55, v143, v55
	v_add_f32_e32 v55, v140, v55
	v_add_f32_e32 v55, v141, v55
	v_mfma_f32_16x16x32_bf16 v[38:41], v[164:167], v[56:59], v[38:41]
	ds_read_b64 v[164:165], v130 offset:13056
	ds_read_b64 v[166:167], v129 offset:10880
	ds_read_b64 v[168:169], v130 offset:10880
	v_add_f32_e32 v55, v144, v55
	v_add_f32_e32 v55, v145, v55
	v_mfma_f32_16x16x32_bf16 v[42:45], v[192:195], v[56:59], v[42:45]
	v_add_f32_e32 v55, v146, v55
	v_cmp_gt_i32_e32 vcc, s5, v115
	v_add_f32_e32 v55, v147, v55
	v_mfma_f32_16x16x32_bf16 v[46:49], v[196:199], v[56:59], v[46:49]
	s_and_b64 vcc, exec, vcc
	v_mov_b32_e32 v137, v54
	v_mfma_f32_16x16x32_bf16 v[50:53], v[200:203], v[56:59], v[50:53]
	v_cvt_pk_bf16_f32 v59, v140, v141
	v_cvt_pk_bf16_f32 v58, v142, v143
	v_mul_f32_e32 v56, v117, v148
	v_add_f32_e32 v117, v56, v55
	s_waitcnt lgkmcnt(12)
	v_mfma_f32_16x16x32_bf16 v[22:25], v[178:181], v[58:61], v[22:25]
	v_mov_b32_e32 v178, v182
	v_mov_b32_e32 v179, v183
	s_waitcnt lgkmcnt(10)
	v_mfma_f32_16x16x32_bf16 v[26:29], v[208:211], v[58:61], v[26:29]
	s_waitcnt lgkmcnt(8)
	v_mfma_f32_16x16x32_bf16 v[30:33], v[212:215], v[58:61], v[30:33]
	s_waitcnt lgkmcnt(6)
	v_mfma_f32_16x16x32_bf16 v[34:37], v[154:157], v[58:61], v[34:37]
	v_mfma_f32_16x16x32_bf16 v[38:41], v[176:179], v[58:61], v[38:41]
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[42:45], v[166:169], v[58:61], v[42:45]
	v_mfma_f32_16x16x32_bf16 v[46:49], v[162:165], v[58:61], v[46:49]
	v_mfma_f32_16x16x32_bf16 v[50:53], v[158:161], v[58:61], v[50:53]
	s_cbranch_vccnz .LBB0_2
	v_mov_b32_e32 v63, v25
	s_branch .LBB0_5
.LBB0_4:
	v_mov_b32_e32 v54, 0xff800000
	v_mov_b32_e32 v24, 0
	v_mov_b32_e32 v23, 0
	v_mov_b32_e32 v22, 0
	v_mov_b32_e32 v29, 0
	v_mov_b32_e32 v28, 0
	v_mov_b32_e32 v27, 0
	v_mov_b32_e32 v26, 0
	v_mov_b32_e32 v33, 0
	v_mov_b32_e32 v32, 0
	v_mov_b32_e32 v31, 0
	v_mov_b32_e32 v30, 0
	v_mov_b32_e32 v37, 0
	v_mov_b32_e32 v36, 0
	v_mov_b32_e32 v35, 0
	v_mov_b32_e32 v34, 0
	v_mov_b32_e32 v41, 0
	v_mov_b32_e32 v40, 0
	v_mov_b32_e32 v39, 0
	v_mov_b32_e32 v38, 0
	v_mov_b32_e32 v45, 0
	v_mov_b32_e32 v44, 0
	v_mov_b32_e32 v43, 0
	v_mov_b32_e32 v42, 0
	v_mov_b32_e32 v49, 0
	v_mov_b32_e32 v48, 0
	v_mov_b32_e32 v47, 0
	v_mov_b32_e32 v46, 0
	v_mov_b32_e32 v53, 0
	v_mov_b32_e32 v52, 0
	v_mov_b32_e32 v51, 0
	v_mov_b32_e32 v50, 0
.LBB0_5:
	v_lshrrev_b32_e32 v2, 4, v0
	v_mov_b32_e32 v0, v117
	v_mov_b32_e32 v1, v117
	s_nop 1
	v_permlane16_swap_b32_e32 v0, v1
	v_cmp_eq_u32_e32 vcc, v0, v117
	v_lshlrev_b32_e32 v4, 9, v69
	v_add3_u32 v4, v114, v4, v113
	ds_write_b128 v4, v[26:29] offset:64
	ds_write_b128 v4, v[30:33] offset:128
	ds_write_b128 v4, v[34:37] offset:192
	ds_write_b128 v4, v[38:41] offset:256
	ds_write_b128 v4, v[42:45] offset:320
	ds_write_b128 v4, v[46:49] offset:384
	ds_write_b128 v4, v[50:53] offset:448
	v_cndmask_b32_e32 v0, v0, v1, vcc
	v_add_f32_e32 v0, v117, v0
	v_mov_b32_e32 v1, v0
	v_mov_b32_e32 v3, v0
	v_mov_b32_e32 v25, v63
	s_nop 0
	v_permlane32_swap_b32_e32 v1, v3
	ds_write_b128 v4, v[22:25]
	v_cmp_eq_u32_e32 vcc, 0, v112
	s_and_saveexec_b64 s[6:7], vcc
	s_cbranch_execz .LBB0_7
	v_cmp_eq_u32_e32 vcc, v1, v0
	v_lshl_add_u32 v4, v69, 2, v114
	s_nop 0
	v_cndmask_b32_e32 v1, v1, v3, vcc
	v_add_f32_e32 v0, v0, v1
	v_add_u32_e32 v1, 0x2000, v4
	ds_write2_b32 v1, v54, v0 offset1:16
.LBB0_7:
	s_or_b64 exec, exec, s[6:7]
	v_lshlrev_b32_e32 v0, 2, v2
	v_add_u32_e32 v1, 0x2000, v0
	s_load_dwordx4 s[8:11], s[0:1], 0x38
	s_waitcnt lgkmcnt(0)
	s_barrier
	ds_read2_b32 v[20:21], v1 offset1:16
	v_add_u32_e32 v1, 0x6400, v0
	ds_read2_b32 v[22:23], v1 offset1:16
	v_add_u32_e32 v1, 0xa800, v0
	v_add_u32_e32 v0, 0xec00, v0
	ds_read2_b32 v[24:25], v1 offset1:16
	ds_read2_b32 v[26:27], v0 offset1:16
	s_waitcnt lgkmcnt(2)
	v_max_f32_e32 v0, v22, v22
	v_max_f32_e32 v1, v20, v20
	v_max_f32_e32 v0, v1, v0
	s_mov_b32 s0, 0xff800000
	s_waitcnt lgkmcnt(0)
	v_max3_f32 v0, v0, v24, v26
	v_sub_f32_e32 v12, v22, v0
	v_sub_f32_e32 v1, v20, v0
	v_exp_f32_e32 v28, v12
	v_exp_f32_e32 v1, v1
	v_sub_f32_e32 v30, v26, v0
	v_sub_f32_e32 v29, v24, v0
	v_exp_f32_e32 v30, v30
	v_exp_f32_e32 v29, v29
	v_cmp_neq_f32_e32 vcc, s0, v22
	v_mov_b32_e32 v22, v21
	v_lshlrev_b32_e32 v36, 5, v69
	v_cndmask_b32_e32 v39, 0, v28, vcc
	v_cmp_neq_f32_e32 vcc, s0, v20
	v_lshl_or_b32 v3, v2, 9, v36
	ds_read_b128 v[4:7], v3
	ds_read_b128 v[8:11], v3 offset:16
	v_cndmask_b32_e32 v38, 0, v1, vcc
	v_cmp_neq_f32_e32 vcc, s0, v26
	v_pk_mul_f32 v[20:21], v[22:23], v[38:39]
	v_mov_b32_e32 v26, v25
	v_cndmask_b32_e32 v41, 0, v30, vcc
	v_cmp_neq_f32_e32 vcc, s0, v24
	v_add_f32_e32 v1, 0, v20
	v_add_f32_e32 v1, v21, v1
	v_cndmask_b32_e32 v40, 0, v29, vcc
	v_pk_mul_f32 v[24:25], v[26:27], v[40:41]
	ds_read_b128 v[12:15], v3 offset:17408
	ds_read_b128 v[16:19], v3 offset:17424
	v_add_f32_e32 v1, v24, v1
	v_add_f32_e32 v1, v25, v1
	v_div_scale_f32 v37, s[0:1], v1, v1, 1.0
	v_rcp_f32_e32 v42, v37
	ds_read_b128 v[20:23], v3 offset:34816
	ds_read_b128 v[24:27], v3 offset:34832
	ds_read_b128 v[28:31], v3 offset:52224
	ds_read_b128 v[32:35], v3 offset:52240
	s_ashr_i32 s3, s4, 31
	s_mul_i32 s0, s50, s2
	v_fma_f32 v3, -v37, v42, 1.0
	v_fmac_f32_e32 v42, v3, v42
	v_div_scale_f32 v3, vcc, 1.0, v1, 1.0
	v_mul_f32_e32 v43, v3, v42
	v_fma_f32 v44, -v37, v43, v3
	v_fmac_f32_e32 v43, v44, v42
	s_waitcnt lgkmcnt(7)
	v_pk_mul_f32 v[6:7], v[38:39], v[6:7] op_sel_hi:[0,1]
	v_pk_mul_f32 v[4:5], v[38:39], v[4:5] op_sel_hi:[0,1]
	v_mov_b32_e32 v44, v39
	v_fma_f32 v3, -v37, v43, v3
	s_mul_hi_i32 s1, s50, s2
	s_add_u32 s0, s0, s4
	v_pk_add_f32 v[6:7], v[6:7], 0 op_sel_hi:[1,0]
	v_pk_add_f32 v[4:5], v[4:5], 0 op_sel_hi:[1,0]
	s_waitcnt lgkmcnt(5)
	v_pk_mul_f32 v[14:15], v[44:45], v[14:15] op_sel_hi:[0,1]
	v_pk_mul_f32 v[12:13], v[44:45], v[12:13] op_sel_hi:[0,1]
	v_div_fmas_f32 v3, v3, v42, v43
	s_addc_u32 s1, s1, s3
	v_pk_add_f32 v[6:7], v[6:7], v[14:15]
	v_pk_add_f32 v[4:5], v[4:5], v[12:13]
	s_waitcnt lgkmcnt(3)
	v_pk_mul_f32 v[12:13], v[40:41], v[22:23] op_sel_hi:[0,1]
	v_div_fixup_f32 v3, v3, v1, 1.0
	v_cmp_lt_f32_e32 vcc, 0, v1
	s_lshl_b64 s[0:1], s[0:1], 4
	v_pk_mul_f32 v[14:15], v[40:41], v[20:21] op_sel_hi:[0,1]
	v_pk_add_f32 v[6:7], v[6:7], v[12:13]
	v_mov_b32_e32 v12, v41
	v_cndmask_b32_e32 v42, 0, v3, vcc
	v_or_b32_e32 v2, s0, v2
	v_mov_b32_e32 v3, s1
	v_pk_add_f32 v[4:5], v[4:5], v[14:15]
	s_waitcnt lgkmcnt(1)
	v_pk_mul_f32 v[14:15], v[12:13], v[30:31] op_sel_hi:[0,1]
	v_pk_mul_f32 v[20:21], v[12:13], v[28:29] op_sel_hi:[0,1]
	v_pk_add_f32 v[6:7], v[6:7], v[14:15]
	v_lshlrev_b64 v[14:15], 9, v[2:3]
	v_pk_add_f32 v[4:5], v[4:5], v[20:21]
	v_mov_b32_e32 v37, 0
	v_lshl_add_u64 v[14:15], s[8:9], 0, v[14:15]
	v_pk_mul_f32 v[6:7], v[42:43], v[6:7] op_sel_hi:[0,1]
	v_pk_mul_f32 v[4:5], v[42:43], v[4:5] op_sel_hi:[0,1]
	v_lshl_add_u64 v[14:15], v[14:15], 0, v[36:37]
	global_store_dwordx4 v[14:15], v[4:7], off
	v_cmp_eq_u32_e32 vcc, 0, v69
	s_nop 0
	v_pk_mul_f32 v[4:5], v[38:39], v[10:11] op_sel_hi:[0,1]
	v_pk_mul_f32 v[6:7], v[38:39], v[8:9] op_sel_hi:[0,1]
	v_pk_add_f32 v[4:5], v[4:5], 0 op_sel_hi:[1,0]
	v_pk_add_f32 v[6:7], v[6:7], 0 op_sel_hi:[1,0]
	v_pk_mul_f32 v[8:9], v[44:45], v[18:19] op_sel_hi:[0,1]
	v_pk_mul_f32 v[10:11], v[44:45], v[16:17] op_sel_hi:[0,1]
	v_pk_add_f32 v[4:5], v[4:5], v[8:9]
	v_pk_add_f32 v[6:7], v[6:7], v[10:11]
	v_pk_mul_f32 v[8:9], v[40:41], v[26:27] op_sel_hi:[0,1]
	v_pk_mul_f32 v[10:11], v[40:41], v[24:25] op_sel_hi:[0,1]
	v_pk_add_f32 v[4:5], v[4:5], v[8:9]
	v_pk_add_f32 v[6:7], v[6:7], v[10:11]
	s_waitcnt lgkmcnt(0)
	v_pk_mul_f32 v[8:9], v[12:13], v[34:35] op_sel_hi:[0,1]
	v_pk_mul_f32 v[10:11], v[12:13], v[32:33] op_sel_hi:[0,1]
	v_pk_add_f32 v[4:5], v[4:5], v[8:9]
	v_pk_add_f32 v[8:9], v[6:7], v[10:11]
	v_pk_mul_f32 v[6:7], v[42:43], v[4:5] op_sel_hi:[0,1]
	v_pk_mul_f32 v[4:5], v[42:43], v[8:9] op_sel_hi:[0,1]
	global_store_dwordx4 v[14:15], v[4:7], off offset:16
	s_and_saveexec_b64 s[0:1], vcc
	s_cbranch_execz .LBB0_9
	v_mov_b32_e32 v4, s10
	v_mov_b32_e32 v5, s11
	v_lshl_add_u64 v[2:3], v[2:3], 3, v[4:5]
	global_store_dwordx2 v[2:3], v[0:1], off
.LBB0_9:
	s_endpgm
.Lfunc_end0:
	.size	pa_decode_mxfp4_kernel_0, .Lfunc_end0-pa_decode_mxfp4_kernel_0
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel pa_decode_mxfp4_kernel_0
		.amdhsa_group_segment_fixed_size 69632
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 92
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
		.amdhsa_system_sgpr_workgroup_id_y 1
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 216
		.amdhsa_next_free_sgpr 96
		.amdhsa_accum_offset 216
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

	.set .Lpa_decode_mxfp4_kernel_0.num_vgpr, 216
	.set .Lpa_decode_mxfp4_kernel_0.num_agpr, 0
	.set .Lpa_decode_mxfp4_kernel_0.numbered_sgpr, 65
	.set .Lpa_decode_mxfp4_kernel_0.num_named_barrier, 0
	.set .Lpa_decode_mxfp4_kernel_0.private_seg_size, 0
	.set .Lpa_decode_mxfp4_kernel_0.uses_vcc, 1
	.set .Lpa_decode_mxfp4_kernel_0.uses_flat_scratch, 0
	.set .Lpa_decode_mxfp4_kernel_0.has_dyn_sized_stack, 0
	.set .Lpa_decode_mxfp4_kernel_0.has_recursion, 0
	.set .Lpa_decode_mxfp4_kernel_0.has_indirect_call, 0
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
        .size:           8
        .value_kind:     by_value
      - .offset:         40
        .size:           8
        .value_kind:     by_value
      - .offset:         48
        .size:           8
        .value_kind:     by_value
      - .offset:         56
        .size:           8
        .value_kind:     by_value
      - .offset:         64
        .size:           8
        .value_kind:     by_value
      - .offset:         72
        .size:           4
        .value_kind:     by_value
      - .offset:         76
        .size:           4
        .value_kind:     by_value
      - .offset:         80
        .size:           4
        .value_kind:     by_value
      - .offset:         84
        .size:           4
        .value_kind:     by_value
      - .offset:         88
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 69632
    .kernarg_segment_align: 8
    .kernarg_segment_size: 92
    .max_flat_workgroup_size: 256
    .name:           pa_decode_mxfp4_kernel_0
    .private_segment_fixed_size: 0
    .reqd_workgroup_size:
      - 256
      - 1
      - 1
    .sgpr_count:     71
    .sgpr_spill_count: 0
    .symbol:         pa_decode_mxfp4_kernel_0.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     216
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa-unknown-gfx950
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
