	.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
	.amdhsa_code_object_version 6
	.text
	.globl	pa_decode_mxfp4_kernel_0
	.p2align	8
	.type	pa_decode_mxfp4_kernel_0,@function
pa_decode_mxfp4_kernel_0:
	s_load_dwordx8 s[40:47], s[0:1], 0x8
	s_load_dwordx2 s[6:7], s[0:1], 0x28
	s_mov_b32 s4, s3
	s_ashr_i32 s3, s2, 31
	s_lshl_b64 s[8:9], s[2:3], 2
	v_and_b32_e32 v61, 15, v0
	s_waitcnt lgkmcnt(0)
	s_add_u32 s6, s6, s8
	s_addc_u32 s7, s7, s9
	s_lshl_b64 s[8:9], s[2:3], 11
	v_lshlrev_b32_e32 v1, 7, v61
	v_and_b32_e32 v106, 48, v0
	v_mov_b32_e32 v2, s40
	v_mov_b32_e32 v3, s41
	v_or3_b32 v4, s8, v1, v106
	v_mov_b32_e32 v5, s9
	v_lshl_add_u64 v[6:7], v[4:5], 1, v[2:3]
	global_load_dwordx4 v[2:5], v[6:7], off offset:16
	global_load_dwordx4 v[8:11], v[6:7], off
	global_load_dwordx4 v[16:19], v[6:7], off offset:128
	global_load_dwordx4 v[34:37], v[6:7], off offset:144
	s_load_dwordx4 s[48:51], s[0:1], 0x48
	s_load_dword s9, s[0:1], 0x58
	s_load_dword s3, s[6:7], 0x0
	v_lshrrev_b32_e32 v108, 6, v0
	v_mov_b32_e32 v55, 0
	s_waitcnt lgkmcnt(0)
	s_mul_i32 s8, s49, s4
	s_lshl_b32 s5, s48, 7
	s_add_i32 s6, s8, s49
	v_mov_b32_e32 v1, s5
	v_mov_b32_e32 v6, s6
	v_min3_i32 v109, s3, v1, v6
	v_bfe_u32 v105, v0, 4, 2
	v_readfirstlane_b32 s3, v109
	s_sub_i32 s3, s3, s8
	s_max_i32 s3, s3, 0
	s_add_i32 s3, s3, 63
	s_ashr_i32 s3, s3, 6
	v_cmp_le_i32_e32 vcc, s3, v108
	v_mul_u32_u24_e32 v107, 0x4400, v108
	v_mov_b32_e32 v118, 0
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
	v_and_b32_e32 v110, 60, v0
	v_cndmask_b32_e32 v34, v34, v35, vcc
	v_max_f32_e32 v34, v34, v34
	v_max_f32_e32 v1, v1, v34
	v_mul_f32_e32 v34, 0x3b124925, v1
	v_cmp_lt_f32_e32 vcc, 0, v1
	v_lshlrev_b32_e32 v111, 3, v105
	s_mul_hi_i32 s5, s48, s2
	v_cndmask_b32_e32 v1, 1.0, v34, vcc
	v_div_scale_f32 v34, s[6:7], v1, v1, 1.0
	v_rcp_f32_e32 v35, v34
	s_movk_i32 s6, 0x1100
	s_mul_i32 s33, s48, s2
	v_mov_b32_e32 v63, v55
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
	v_pk_mul_f32 v[26:27], v[34:35], v[26:27] op_sel_hi:[0,1]
	v_mov_b32_e32 v4, 0
	v_cvt_pk_fp8_f32 v4, v26, v38
	v_and_b32_e32 v26, 64, v0
	v_cvt_pk_fp8_f32 v5, v21, v7 op_sel:[0,0,1]
	v_pk_mul_f32 v[20:21], v[34:35], v[24:25] op_sel_hi:[0,1]
	v_pk_mul_f32 v[22:23], v[34:35], v[22:23] op_sel_hi:[0,1]
	v_mov_b32_e32 v6, 0
	v_sub_u32_e32 v26, s8, v26
	v_pk_mul_f32 v[32:33], v[34:35], v[32:33] op_sel_hi:[0,1]
	v_pk_mul_f32 v[36:37], v[34:35], v[2:3] op_sel_hi:[0,1]
	v_mov_b32_e32 v2, 0
	v_pk_mul_f32 v[30:31], v[34:35], v[30:31] op_sel_hi:[0,1]
	v_pk_mul_f32 v[28:29], v[34:35], v[28:29] op_sel_hi:[0,1]
	v_mov_b32_e32 v3, 0
	v_cvt_pk_fp8_f32 v6, v20, v22
	v_pk_mul_f32 v[18:19], v[34:35], v[18:19] op_sel_hi:[0,1]
	v_pk_mul_f32 v[14:15], v[34:35], v[14:15] op_sel_hi:[0,1]
	v_mov_b32_e32 v7, 0
	v_pk_mul_f32 v[16:17], v[34:35], v[16:17] op_sel_hi:[0,1]
	v_pk_mul_f32 v[24:25], v[34:35], v[8:9] op_sel_hi:[0,1]
	v_mov_b32_e32 v8, 0
	v_pk_mul_f32 v[12:13], v[34:35], v[12:13] op_sel_hi:[0,1]
	v_pk_mul_f32 v[10:11], v[34:35], v[10:11] op_sel_hi:[0,1]
	v_mov_b32_e32 v9, 0
	v_and_b32_e32 v26, 0x7f, v26
	v_cvt_pk_fp8_f32 v2, v32, v36
	v_cvt_pk_fp8_f32 v3, v30, v28
	v_cvt_pk_fp8_f32 v4, v27, v39 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v7, v18, v14
	v_cvt_pk_fp8_f32 v8, v16, v24
	v_cvt_pk_fp8_f32 v9, v12, v10
	v_add_u32_e32 v27, v26, v61
	v_add_u32_e32 v28, 16, v27
	v_and_b32_e32 v22, 3, v0
	v_lshl_or_b32 v54, v27, 6, v106
	v_lshl_or_b32 v62, v27, 2, v105
	v_lshl_or_b32 v64, v28, 6, v106
	v_lshl_or_b32 v66, v28, 2, v105
	v_add_u32_e32 v28, 32, v27
	v_add_u32_e32 v27, 48, v27
	v_add_u32_e32 v26, v26, v110
	v_cvt_pk_fp8_f32 v6, v21, v23 op_sel:[0,0,1]
	v_lshlrev_b32_e32 v23, 4, v22
	v_lshl_or_b32 v72, v27, 6, v106
	v_lshl_or_b32 v74, v27, 2, v105
	v_add_u32_e32 v27, 1, v26
	v_cvt_pk_fp8_f32 v2, v33, v37 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v3, v31, v29 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v7, v19, v15 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v8, v17, v25 op_sel:[0,0,1]
	v_cvt_pk_fp8_f32 v9, v13, v11 op_sel:[0,0,1]
	v_lshl_or_b32 v76, v26, 6, v23
	v_lshl_or_b32 v78, v26, 2, v22
	v_lshl_or_b32 v80, v27, 6, v23
	v_lshl_or_b32 v82, v27, 2, v22
	v_add_u32_e32 v27, 2, v26
	v_add_u32_e32 v26, 3, v26
	v_mul_f32_e32 v1, s51, v1
	v_lshlrev_b32_e32 v10, 2, v105
	v_lshlrev_b32_e32 v24, 1, v0
	v_mad_u32_u24 v25, v22, s6, v107
	s_movk_i32 s6, 0x88
	v_lshl_or_b32 v86, v27, 2, v22
	v_lshl_or_b32 v90, v26, 2, v22
	v_and_b32_e32 v22, 0xc0, v0
	v_mul_f32_e32 v56, s9, v1
	v_or_b32_e32 v16, 16, v10
	v_or_b32_e32 v20, 32, v10
	v_or_b32_e32 v58, 48, v10
	v_and_b32_e32 v24, 0x78, v24
	v_mad_u32_u24 v112, v61, s6, v107
	v_lshl_or_b32 v84, v27, 6, v23
	v_lshl_or_b32 v88, v26, 6, v23
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
	v_or_b32_e32 v59, 51, v10
	v_or_b32_e32 v60, 50, v10
	v_lshlrev_b32_e32 v113, 1, v16
	v_add_u32_e32 v114, 0x880, v112
	v_add_u32_e32 v115, 0x1100, v112
	v_add_u32_e32 v116, 0x1980, v112
	v_lshlrev_b32_e32 v117, 1, v20
	v_lshlrev_b32_e32 v119, 1, v58
	v_mov_b32_e32 v65, v55
	v_mov_b32_e32 v67, v55
	v_lshl_or_b32 v68, v28, 6, v106
	v_mov_b32_e32 v69, v55
	v_lshl_or_b32 v70, v28, 2, v105
	v_mov_b32_e32 v71, v55
	v_mov_b32_e32 v73, v55
	v_mov_b32_e32 v75, v55
	v_mov_b32_e32 v77, v55
	v_mov_b32_e32 v79, v55
	v_mov_b32_e32 v81, v55
	v_mov_b32_e32 v83, v55
	v_mov_b32_e32 v85, v55
	v_mov_b32_e32 v87, v55
	v_mov_b32_e32 v89, v55
	v_mov_b32_e32 v91, v55
	v_mov_b32_e32 v57, v56
	v_mov_b32_e32 v92, v56
	v_mov_b32_e32 v93, v56
	v_mov_b32_e32 v94, v56
	v_mov_b32_e32 v95, v56
	v_mov_b32_e32 v96, v56
	v_mov_b32_e32 v97, v56
	v_mov_b32_e32 v98, v56
	v_mov_b32_e32 v99, v56
	v_mov_b32_e32 v100, v56
	v_mov_b32_e32 v101, v56
	v_mov_b32_e32 v102, v56
	v_mov_b32_e32 v103, v56
	v_readfirstlane_b32 s40, v23
	v_mov_b32_e32 v124, 0xff800000
	s_movk_i32 s41, 0x2000
	v_mov_b32_e32 v120, 0x7f
	v_mov_b32_e32 v121, 0xff800000
	s_mov_b32 s48, 0x5040100
	v_add_u32_e32 v122, v25, v24
	s_mov_b32 s49, 0x7060302
	v_add_u32_e32 v123, v112, v111
	v_mov_b32_e32 v118, v55
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
	s_ashr_i32 s6, s40, 7
	s_ashr_i32 s7, s6, 31
	s_add_u32 s6, s33, s6
	s_addc_u32 s7, s5, s7
	s_lshl_b64 s[6:7], s[6:7], 2
	s_add_u32 s6, s46, s6
	s_addc_u32 s7, s47, s7
	s_load_dword s6, s[6:7], 0x0
	v_add_u32_e32 v170, s40, v110
	v_add_u32_e32 v182, 1, v170
	v_add_u32_e32 v183, 2, v170
	v_add_u32_e32 v184, 3, v170
	s_waitcnt lgkmcnt(0)
	s_mul_i32 s9, s6, 0x2200
	s_mul_hi_i32 s8, s6, 0x2200
	s_add_u32 s6, s42, s9
	s_addc_u32 s7, s43, s8
	v_lshl_add_u64 v[142:143], s[6:7], 0, v[62:63]
	v_add_co_u32_e32 v156, vcc, s41, v142
	v_lshl_add_u64 v[146:147], s[6:7], 0, v[66:67]
	s_nop 0
	v_addc_co_u32_e32 v157, vcc, 0, v143, vcc
	v_add_co_u32_e32 v158, vcc, s41, v146
	v_lshl_add_u64 v[150:151], s[6:7], 0, v[70:71]
	s_nop 0
	v_addc_co_u32_e32 v159, vcc, 0, v147, vcc
	v_add_co_u32_e32 v160, vcc, s41, v150
	v_lshl_add_u64 v[140:141], s[6:7], 0, v[54:55]
	v_lshl_add_u64 v[144:145], s[6:7], 0, v[64:65]
	v_lshl_add_u64 v[148:149], s[6:7], 0, v[68:69]
	v_lshl_add_u64 v[152:153], s[6:7], 0, v[72:73]
	v_lshl_add_u64 v[154:155], s[6:7], 0, v[74:75]
	s_add_u32 s6, s44, s9
	v_addc_co_u32_e32 v161, vcc, 0, v151, vcc
	v_add_co_u32_e32 v162, vcc, s41, v154
	s_addc_u32 s7, s45, s8
	global_load_dwordx4 v[192:195], v[140:141], off
	global_load_dwordx4 v[196:199], v[144:145], off
	v_addc_co_u32_e32 v163, vcc, 0, v155, vcc
	v_lshl_add_u64 v[144:145], s[6:7], 0, v[78:79]
	v_add_co_u32_e32 v166, vcc, s41, v144
	global_load_dwordx4 v[200:203], v[148:149], off
	global_load_dwordx4 v[204:207], v[152:153], off
	v_lshl_add_u64 v[148:149], s[6:7], 0, v[82:83]
	v_addc_co_u32_e32 v167, vcc, 0, v145, vcc
	v_add_co_u32_e32 v168, vcc, s41, v148
	v_lshl_add_u64 v[152:153], s[6:7], 0, v[86:87]
	s_nop 0
	v_addc_co_u32_e32 v169, vcc, 0, v149, vcc
	v_add_co_u32_e32 v152, vcc, s41, v152
	v_lshl_add_u64 v[164:165], s[6:7], 0, v[90:91]
	s_nop 0
	v_addc_co_u32_e32 v153, vcc, 0, v153, vcc
	v_add_co_u32_e32 v164, vcc, s41, v164
	v_lshl_add_u64 v[140:141], s[6:7], 0, v[76:77]
	v_lshl_add_u64 v[150:151], s[6:7], 0, v[84:85]
	v_lshl_add_u64 v[154:155], s[6:7], 0, v[88:89]
	v_addc_co_u32_e32 v165, vcc, 0, v165, vcc
	v_lshl_add_u64 v[146:147], s[6:7], 0, v[80:81]
	global_load_dwordx4 v[140:143], v[140:141], off
	s_nop 0
	global_load_dwordx4 v[148:151], v[150:151], off
	s_nop 0
	global_load_ubyte v185, v[152:153], off
	s_nop 0
	global_load_ubyte v164, v[164:165], off
	s_nop 0
	global_load_dwordx4 v[152:155], v[154:155], off
	s_nop 0
	global_load_ubyte v165, v[168:169], off
	s_nop 0
	global_load_ubyte v166, v[166:167], off
	v_cmp_lt_i32_e64 s[10:11], v170, v109
	global_load_dwordx4 v[144:147], v[146:147], off
	v_cmp_lt_i32_e32 vcc, v182, v109
	global_load_ubyte v156, v[156:157], off
	v_cmp_lt_i32_e64 s[6:7], v183, v109
	global_load_ubyte v190, v[162:163], off
	global_load_ubyte v157, v[158:159], off
	v_cmp_lt_i32_e64 s[8:9], v184, v109
	global_load_ubyte v158, v[160:161], off
	v_add_u32_e32 v171, 0x800, v122
	v_add_u32_e32 v130, s40, v10
	v_add_u32_e32 v131, s40, v1
	v_add_u32_e32 v126, s40, v11
	v_add_u32_e32 v127, s40, v12
	v_add_u32_e32 v104, s40, v13
	v_add_u32_e32 v128, s40, v15
	v_add_u32_e32 v129, s40, v16
	v_add_u32_e32 v136, s40, v21
	v_add_u32_e32 v137, s40, v58
	v_cmp_lt_i32_e64 s[14:15], v127, v109
	v_cmp_lt_i32_e64 s[16:17], v126, v109
	v_add_u32_e32 v125, s40, v14
	v_add_u32_e32 v138, s40, v59
	v_add_u32_e32 v139, s40, v60
	v_cmp_lt_i32_e64 s[12:13], v128, v109
	v_cmp_lt_i32_e64 s[28:29], v137, v109
	v_cmp_lt_i32_e64 s[30:31], v136, v109
	v_cmp_lt_i32_e64 s[38:39], v104, v109
	v_add_u32_e32 v134, s40, v19
	v_add_u32_e32 v135, s40, v20
	v_cmp_lt_i32_e64 s[18:19], v125, v109
	v_cmp_lt_i32_e64 s[34:35], v139, v109
	v_cmp_lt_i32_e64 s[36:37], v138, v109
	v_add_u32_e32 v132, s40, v17
	v_add_u32_e32 v133, s40, v18
	v_cmp_lt_i32_e64 s[20:21], v135, v109
	v_cmp_lt_i32_e64 s[22:23], v134, v109
	v_cmp_lt_i32_e64 s[24:25], v133, v109
	v_cmp_lt_i32_e64 s[26:27], v132, v109
	v_add_u32_e32 v172, 0xc00, v122
	v_add_u32_e32 v173, v112, v113
	v_add_u32_e32 v174, v114, v111
	v_add_u32_e32 v175, v114, v113
	v_add_u32_e32 v176, v115, v111
	v_add_u32_e32 v177, v115, v113
	v_add_u32_e32 v178, v116, v111
	v_add_u32_e32 v179, v116, v113
	v_add_u32_e32 v180, v112, v117
	v_add_u32_e32 v181, v112, v119
	v_add_u32_e32 v187, v115, v117
	v_add_u32_e32 v188, v115, v119
	v_add_u32_e32 v189, v116, v117
	v_add_u32_e32 v191, v116, v119
	v_add_u32_e32 v108, 4, v108
	s_addk_i32 s40, 0x100
	s_waitcnt vmcnt(10)
	v_cndmask_b32_e64 v149, 0, v149, s[6:7]
	v_cndmask_b32_e64 v150, 0, v150, s[6:7]
	v_cndmask_b32_e64 v151, 0, v151, s[6:7]
	s_waitcnt vmcnt(7)
	v_cndmask_b32_e64 v186, 0, v155, s[8:9]
	v_cndmask_b32_e64 v167, 0, v143, s[10:11]
	v_cndmask_b32_e64 v168, 0, v142, s[10:11]
	v_cndmask_b32_e64 v169, 0, v141, s[10:11]
	v_cndmask_b32_e64 v170, 0, v140, s[10:11]
	v_lshlrev_b32_e32 v140, 23, v164
	v_lshlrev_b32_e32 v141, 23, v185
	s_waitcnt vmcnt(6)
	v_lshlrev_b32_e32 v142, 23, v165
	s_waitcnt vmcnt(5)
	v_lshlrev_b32_e32 v143, 23, v166
	s_waitcnt vmcnt(4)
	v_cndmask_b32_e32 v183, 0, v146, vcc
	v_cndmask_b32_e32 v184, 0, v145, vcc
	v_cndmask_b32_e32 v144, 0, v144, vcc
	v_cndmask_b32_e64 v145, 0, v148, s[6:7]
	v_cndmask_b32_e64 v148, 0, v154, s[8:9]
	v_cndmask_b32_e64 v146, 0, v152, s[8:9]
	v_cndmask_b32_e64 v152, 1.0, v143, s[10:11]
	v_cndmask_b32_e32 v154, 1.0, v142, vcc
	v_cndmask_b32_e64 v155, 1.0, v141, s[6:7]
	v_cndmask_b32_e64 v164, 1.0, v140, s[8:9]
	v_cndmask_b32_e32 v182, 0, v147, vcc
	v_cvt_scalef32_pk_bf16_fp4 v142, v170, v152
	v_cvt_scalef32_pk_bf16_fp4 v143, v144, v154
	v_cvt_scalef32_pk_bf16_fp4 v147, v145, v155
	v_cvt_scalef32_pk_bf16_fp4 v165, v146, v164
	v_perm_b32 v140, v143, v142, s48
	v_perm_b32 v141, v165, v147, s48
	v_perm_b32 v142, v143, v142, s49
	v_perm_b32 v143, v165, v147, s49
	v_cvt_scalef32_pk_bf16_fp4 v147, v170, v152 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v165, v144, v154 op_sel:[1,0,0]
	ds_write2_b64 v122, v[140:141], v[142:143] offset1:17
	v_cvt_scalef32_pk_bf16_fp4 v143, v145, v155 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v166, v146, v164 op_sel:[1,0,0]
	v_perm_b32 v140, v165, v147, s48
	v_perm_b32 v141, v166, v143, s48
	v_perm_b32 v142, v165, v147, s49
	v_perm_b32 v143, v166, v143, s49
	v_cvt_scalef32_pk_bf16_fp4 v147, v170, v152 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v165, v170, v152 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v166, v144, v154 op_sel:[0,1,0]
	ds_write2_b64 v122, v[140:141], v[142:143] offset0:34 offset1:51
	v_cvt_scalef32_pk_bf16_fp4 v143, v145, v155 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v170, v146, v164 op_sel:[0,1,0]
	v_perm_b32 v140, v166, v147, s48
	v_perm_b32 v141, v170, v143, s48
	v_perm_b32 v142, v166, v147, s49
	v_perm_b32 v143, v170, v143, s49
	ds_write2_b64 v122, v[140:141], v[142:143] offset0:68 offset1:85
	v_cvt_scalef32_pk_bf16_fp4 v142, v144, v154 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v143, v145, v155 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v145, v146, v164 op_sel:[1,1,0]
	v_cndmask_b32_e64 v153, 0, v153, s[8:9]
	v_perm_b32 v140, v142, v165, s48
	v_perm_b32 v141, v145, v143, s48
	v_perm_b32 v142, v142, v165, s49
	v_perm_b32 v143, v145, v143, s49
	v_cvt_scalef32_pk_bf16_fp4 v147, v169, v152
	v_cvt_scalef32_pk_bf16_fp4 v144, v184, v154
	ds_write2_b64 v122, v[140:141], v[142:143] offset0:102 offset1:119
	v_cvt_scalef32_pk_bf16_fp4 v143, v149, v155
	v_cvt_scalef32_pk_bf16_fp4 v165, v153, v164
	v_perm_b32 v140, v144, v147, s48
	v_perm_b32 v141, v165, v143, s48
	v_perm_b32 v142, v144, v147, s49
	v_perm_b32 v143, v165, v143, s49
	v_cvt_scalef32_pk_bf16_fp4 v166, v169, v152 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v170, v169, v152 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v145, v184, v154 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v146, v184, v154 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v144, v149, v155 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v147, v149, v155 op_sel:[0,1,0]
	ds_write2_b64 v122, v[140:141], v[142:143] offset0:136 offset1:153
	v_cvt_scalef32_pk_bf16_fp4 v143, v153, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v165, v153, v164 op_sel:[0,1,0]
	v_perm_b32 v140, v145, v166, s48
	v_perm_b32 v141, v143, v144, s48
	v_perm_b32 v142, v145, v166, s49
	v_perm_b32 v143, v143, v144, s49
	v_perm_b32 v144, v146, v170, s48
	v_perm_b32 v145, v165, v147, s48
	v_perm_b32 v146, v146, v170, s49
	v_perm_b32 v147, v165, v147, s49
	ds_write2_b64 v122, v[140:141], v[142:143] offset0:170 offset1:187
	s_waitcnt vmcnt(3)
	v_mfma_scale_f32_16x16x128_f8f6f4 v[140:143], v[192:195], v[2:9], 0, v156, v120 op_sel_hi:[0,0,0] cbsz:4
	v_cvt_scalef32_pk_bf16_fp4 v156, v169, v152 op_sel:[1,1,0]
	ds_write2_b64 v122, v[144:145], v[146:147] offset0:204 offset1:221
	v_cvt_scalef32_pk_bf16_fp4 v146, v184, v154 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v147, v149, v155 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v149, v153, v164 op_sel:[1,1,0]
	v_perm_b32 v144, v146, v156, s48
	v_perm_b32 v145, v149, v147, s48
	v_perm_b32 v146, v146, v156, s49
	v_perm_b32 v147, v149, v147, s49
	v_cvt_scalef32_pk_bf16_fp4 v159, v168, v152
	v_cvt_scalef32_pk_bf16_fp4 v149, v183, v154
	ds_write2_b64 v122, v[144:145], v[146:147] offset0:238 offset1:255
	v_cvt_scalef32_pk_bf16_fp4 v147, v150, v155
	v_cvt_scalef32_pk_bf16_fp4 v153, v148, v164
	v_perm_b32 v144, v149, v159, s48
	v_perm_b32 v145, v153, v147, s48
	v_perm_b32 v146, v149, v159, s49
	v_perm_b32 v147, v153, v147, s49
	v_cvt_scalef32_pk_bf16_fp4 v160, v168, v152 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v161, v168, v152 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v162, v168, v152 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v156, v167, v152
	v_cvt_scalef32_pk_bf16_fp4 v159, v167, v152 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v163, v167, v152 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v166, v167, v152 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v149, v183, v154 op_sel:[1,0,0]
	ds_write2_b64 v171, v[144:145], v[146:147] offset0:16 offset1:33
	v_cvt_scalef32_pk_bf16_fp4 v147, v150, v155 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v152, v148, v164 op_sel:[1,0,0]
	v_perm_b32 v144, v149, v160, s48
	v_perm_b32 v145, v152, v147, s48
	v_perm_b32 v146, v149, v160, s49
	v_perm_b32 v147, v152, v147, s49
	v_cvt_scalef32_pk_bf16_fp4 v149, v183, v154 op_sel:[0,1,0]
	ds_write2_b64 v171, v[144:145], v[146:147] offset0:50 offset1:67
	v_cvt_scalef32_pk_bf16_fp4 v147, v150, v155 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v153, v148, v164 op_sel:[0,1,0]
	v_perm_b32 v144, v149, v161, s48
	v_perm_b32 v145, v153, v147, s48
	v_perm_b32 v146, v149, v161, s49
	v_perm_b32 v147, v153, v147, s49
	v_cvt_scalef32_pk_bf16_fp4 v152, v183, v154 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v153, v150, v155 op_sel:[1,1,0]
	ds_write2_b64 v171, v[144:145], v[146:147] offset0:84 offset1:101
	v_cvt_scalef32_pk_bf16_fp4 v144, v148, v164 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v160, v182, v154
	v_cvt_scalef32_pk_bf16_fp4 v161, v182, v154 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v165, v182, v154 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v167, v182, v154 op_sel:[1,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v168, v151, v155
	v_cvt_scalef32_pk_bf16_fp4 v169, v151, v155 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v182, v151, v155 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v183, v151, v155 op_sel:[1,1,0]
	v_perm_b32 v148, v152, v162, s48
	v_perm_b32 v149, v144, v153, s48
	v_perm_b32 v150, v152, v162, s49
	v_perm_b32 v151, v144, v153, s49
	s_waitcnt vmcnt(1)
	v_mfma_scale_f32_16x16x128_f8f6f4 v[144:147], v[196:199], v[2:9], 0, v157, v120 op_sel_hi:[0,0,0] cbsz:4
	ds_write2_b64 v171, v[148:149], v[150:151] offset0:118 offset1:135
	v_cvt_scalef32_pk_bf16_fp4 v148, v186, v164
	v_perm_b32 v152, v160, v156, s48
	v_perm_b32 v153, v148, v168, s48
	v_perm_b32 v154, v160, v156, s49
	v_perm_b32 v155, v148, v168, s49
	ds_write2_b64 v171, v[152:153], v[154:155] offset0:152 offset1:169
	s_waitcnt vmcnt(0)
	v_mfma_scale_f32_16x16x128_f8f6f4 v[148:151], v[200:203], v[2:9], 0, v158, v120 op_sel_hi:[0,0,0] cbsz:4
	v_cvt_scalef32_pk_bf16_fp4 v152, v186, v164 op_sel:[1,0,0]
	v_cvt_scalef32_pk_bf16_fp4 v153, v186, v164 op_sel:[0,1,0]
	v_cvt_scalef32_pk_bf16_fp4 v154, v186, v164 op_sel:[1,1,0]
	v_perm_b32 v156, v161, v159, s48
	v_perm_b32 v157, v152, v169, s48
	v_perm_b32 v158, v161, v159, s49
	v_perm_b32 v159, v152, v169, s49
	v_perm_b32 v160, v165, v163, s48
	v_perm_b32 v161, v153, v182, s48
	v_perm_b32 v162, v165, v163, s49
	v_perm_b32 v163, v153, v182, s49
	v_perm_b32 v164, v167, v166, s48
	v_perm_b32 v165, v154, v183, s48
	v_perm_b32 v166, v167, v166, s49
	v_perm_b32 v167, v154, v183, s49
	v_mfma_scale_f32_16x16x128_f8f6f4 v[152:155], v[204:207], v[2:9], 0, v190, v120 op_sel_hi:[0,0,0] cbsz:4
	v_mul_f32_e64 v140, v56, v140
	v_mul_f32_e64 v141, v57, v141
	v_cmp_lt_i32_e64 s[6:7], v131, v109
	v_cmp_lt_i32_e64 s[8:9], v130, v109
	v_mul_f32_e64 v142, v92, v142
	v_mul_f32_e64 v143, v93, v143
	v_cndmask_b32_e64 v141, v121, v141, s[6:7]
	v_cndmask_b32_e64 v140, v121, v140, s[8:9]
	v_pk_mul_f32 v[144:145], v[94:95], v[144:145]
	v_cmp_lt_i32_e64 s[10:11], v129, v109
	v_cndmask_b32_e64 v137, v121, v143, s[16:17]
	v_cndmask_b32_e64 v136, v121, v142, s[14:15]
	v_max_f32_e32 v104, v140, v141
	v_pk_mul_f32 v[146:147], v[96:97], v[146:147]
	v_cndmask_b32_e64 v139, v121, v145, s[12:13]
	v_cndmask_b32_e64 v138, v121, v144, s[10:11]
	v_max3_f32 v104, v104, v136, v137
	v_pk_mul_f32 v[128:129], v[98:99], v[148:149]
	v_cndmask_b32_e64 v135, v121, v147, s[38:39]
	v_cndmask_b32_e64 v134, v121, v146, s[18:19]
	v_max3_f32 v104, v104, v138, v139
	v_pk_mul_f32 v[126:127], v[100:101], v[150:151]
	v_cndmask_b32_e64 v129, v121, v129, s[22:23]
	v_cndmask_b32_e64 v128, v121, v128, s[20:21]
	v_max3_f32 v104, v104, v134, v135
	v_pk_mul_f32 v[130:131], v[102:103], v[152:153]
	v_cndmask_b32_e64 v127, v121, v127, s[26:27]
	v_cndmask_b32_e64 v126, v121, v126, s[24:25]
	v_max3_f32 v104, v104, v128, v129
	v_pk_mul_f32 v[132:133], v[102:103], v[154:155]
	v_cndmask_b32_e64 v131, v121, v131, s[30:31]
	v_cndmask_b32_e64 v130, v121, v130, s[28:29]
	v_max3_f32 v104, v104, v126, v127
	v_cndmask_b32_e64 v133, v121, v133, s[36:37]
	v_cndmask_b32_e64 v132, v121, v132, s[34:35]
	v_max3_f32 v104, v104, v130, v131
	v_max3_f32 v104, v104, v132, v133
	v_mov_b32_e32 v125, v104
	v_mov_b32_e32 v142, v104
	s_nop 1
	v_permlane16_swap_b32_e32 v125, v142
	v_cmp_eq_u32_e64 s[6:7], v125, v104
	v_add_u32_e32 v170, v114, v117
	v_add_u32_e32 v185, v114, v119
	v_cndmask_b32_e64 v125, v125, v142, s[6:7]
	v_max_f32_e32 v125, v125, v125
	v_max_f32_e32 v104, v104, v125
	v_mov_b32_e32 v125, v104
	v_mov_b32_e32 v142, v104
	s_nop 1
	v_permlane32_swap_b32_e32 v125, v142
	v_cmp_eq_u32_e64 s[6:7], v125, v104
	ds_write2_b64 v171, v[156:157], v[158:159] offset0:186 offset1:203
	ds_write2_b64 v171, v[160:161], v[162:163] offset0:220 offset1:237
	ds_write2_b64 v172, v[164:165], v[166:167] offset0:126 offset1:143
	v_cndmask_b32_e64 v125, v125, v142, s[6:7]
	v_max3_f32 v104, v124, v104, v125
	v_sub_f32_e32 v142, v124, v104
	v_pk_add_f32 v[124:125], v[140:141], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[136:137], v[136:137], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[138:139], v[138:139], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[134:135], v[134:135], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	ds_read2st64_b64 v[156:159], v123 offset1:17
	ds_read2st64_b64 v[164:167], v173 offset1:17
	ds_read_b64 v[198:199], v176
	ds_read_b64 v[200:201], v177
	ds_read_b64 v[176:177], v178
	ds_read_b64 v[178:179], v179
	ds_read_b64 v[202:203], v123 offset:10880
	ds_read_b64 v[204:205], v173 offset:10880
	ds_read_b64 v[206:207], v123 offset:13056
	ds_read_b64 v[210:211], v123 offset:15232
	ds_read_b64 v[214:215], v174
	ds_read_b64 v[216:217], v175
	ds_read_b64 v[208:209], v173 offset:13056
	ds_read_b64 v[212:213], v173 offset:15232
	ds_read2st64_b64 v[172:175], v180 offset1:17
	ds_read2st64_b64 v[194:197], v181 offset1:17
	ds_read_b64 v[168:169], v170
	ds_read_b64 v[170:171], v185
	ds_read_b64 v[182:183], v187
	ds_read_b64 v[184:185], v188
	s_waitcnt lgkmcnt(14)
	v_mov_b32_e32 v162, v156
	v_mov_b32_e32 v163, v157
	v_mov_b32_e32 v160, v166
	v_mov_b32_e32 v161, v167
	v_exp_f32_e32 v142, v142
	v_exp_f32_e32 v143, v124
	v_exp_f32_e32 v144, v125
	v_exp_f32_e32 v136, v136
	v_exp_f32_e32 v137, v137
	v_exp_f32_e32 v138, v138
	v_exp_f32_e32 v139, v139
	v_exp_f32_e32 v134, v134
	v_exp_f32_e32 v135, v135
	v_pk_add_f32 v[140:141], v[126:127], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_mul_f32 v[24:25], v[24:25], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[22:23], v[22:23], v[142:143] op_sel_hi:[1,0]
	v_cvt_pk_bf16_f32 v127, v134, v135
	v_cvt_pk_bf16_f32 v126, v138, v139
	v_cvt_pk_bf16_f32 v125, v136, v137
	v_cvt_pk_bf16_f32 v124, v143, v144
	v_pk_mul_f32 v[28:29], v[28:29], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[26:27], v[26:27], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[32:33], v[32:33], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[30:31], v[30:31], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[36:37], v[36:37], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[34:35], v[34:35], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[40:41], v[40:41], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[38:39], v[38:39], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[44:45], v[44:45], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[42:43], v[42:43], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[48:49], v[48:49], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[46:47], v[46:47], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[52:53], v[52:53], v[142:143] op_sel_hi:[1,0]
	v_pk_mul_f32 v[50:51], v[50:51], v[142:143] op_sel_hi:[1,0]
	v_mfma_f32_16x16x32_bf16 v[22:25], v[162:165], v[124:127], v[22:25]
	v_add_f32_e64 v128, v128, -v104
	v_add_f32_e64 v129, v129, -v104
	v_exp_f32_e32 v140, v140
	v_exp_f32_e32 v145, v128
	s_waitcnt lgkmcnt(8)
	v_mfma_f32_16x16x32_bf16 v[26:29], v[214:217], v[124:127], v[26:29]
	v_exp_f32_e32 v146, v129
	v_pk_add_f32 v[130:131], v[130:131], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_pk_add_f32 v[132:133], v[132:133], v[104:105] op_sel_hi:[1,0] neg_lo:[0,1] neg_hi:[0,1]
	v_mfma_f32_16x16x32_bf16 v[30:33], v[198:201], v[124:127], v[30:33]
	v_exp_f32_e32 v141, v141
	s_waitcnt lgkmcnt(5)
	v_mov_b32_e32 v192, v172
	v_mov_b32_e32 v193, v173
	v_mfma_f32_16x16x32_bf16 v[34:37], v[176:179], v[124:127], v[34:37]
	v_exp_f32_e32 v130, v130
	v_exp_f32_e32 v131, v131
	v_exp_f32_e32 v132, v132
	v_mfma_f32_16x16x32_bf16 v[38:41], v[158:161], v[124:127], v[38:41]
	v_exp_f32_e32 v133, v133
	ds_read_b64 v[148:149], v189
	ds_read_b64 v[150:151], v191
	ds_read_b64 v[154:155], v181 offset:15232
	ds_read_b64 v[158:159], v181 offset:13056
	ds_read_b64 v[160:161], v180 offset:10880
	ds_read_b64 v[162:163], v181 offset:10880
	v_mfma_f32_16x16x32_bf16 v[42:45], v[202:205], v[124:127], v[42:45]
	ds_read_b64 v[156:157], v180 offset:13056
	ds_read_b64 v[152:153], v180 offset:15232
	s_waitcnt lgkmcnt(12)
	v_mov_b32_e32 v176, v196
	v_mov_b32_e32 v177, v197
	v_mfma_f32_16x16x32_bf16 v[46:49], v[206:209], v[124:127], v[46:49]
	v_cvt_pk_bf16_f32 v129, v132, v133
	v_cvt_pk_bf16_f32 v128, v130, v131
	v_cmp_gt_i32_e32 vcc, s3, v108
	v_mfma_f32_16x16x32_bf16 v[50:53], v[210:213], v[124:127], v[50:53]
	v_add_f32_e32 v125, v143, v144
	v_add_f32_e32 v125, v136, v125
	v_add_f32_e32 v125, v137, v125
	v_add_f32_e32 v125, v138, v125
	v_add_f32_e32 v125, v139, v125
	v_add_f32_e32 v125, v134, v125
	v_add_f32_e32 v125, v135, v125
	v_add_f32_e32 v125, v145, v125
	v_add_f32_e32 v125, v146, v125
	v_add_f32_e32 v125, v140, v125
	v_add_f32_e32 v125, v141, v125
	v_cvt_pk_bf16_f32 v127, v140, v141
	v_cvt_pk_bf16_f32 v126, v145, v146
	v_add_f32_e32 v125, v130, v125
	v_add_f32_e32 v125, v131, v125
	v_mfma_f32_16x16x32_bf16 v[22:25], v[192:195], v[126:129], v[22:25]
	v_add_f32_e32 v125, v132, v125
	v_mul_f32_e32 v118, v118, v142
	v_add_f32_e32 v125, v133, v125
	s_waitcnt lgkmcnt(10)
	v_mfma_f32_16x16x32_bf16 v[26:29], v[168:171], v[126:129], v[26:29]
	s_and_b64 vcc, exec, vcc
	v_mov_b32_e32 v124, v104
	v_add_f32_e32 v118, v118, v125
	s_waitcnt lgkmcnt(8)
	v_mfma_f32_16x16x32_bf16 v[30:33], v[182:185], v[126:129], v[30:33]
	s_waitcnt lgkmcnt(6)
	v_mfma_f32_16x16x32_bf16 v[34:37], v[148:151], v[126:129], v[34:37]
	v_mfma_f32_16x16x32_bf16 v[38:41], v[174:177], v[126:129], v[38:41]
	s_waitcnt lgkmcnt(2)
	v_mfma_f32_16x16x32_bf16 v[42:45], v[160:163], v[126:129], v[42:45]
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[46:49], v[156:159], v[126:129], v[46:49]
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[50:53], v[152:155], v[126:129], v[50:53]
	s_cbranch_vccnz .LBB0_2
	v_mov_b32_e32 v55, v25
	s_branch .LBB0_5
.LBB0_4:
	v_mov_b32_e32 v104, 0xff800000
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
	v_mov_b32_e32 v0, v118
	v_mov_b32_e32 v1, v118
	s_nop 1
	v_permlane16_swap_b32_e32 v0, v1
	v_cmp_eq_u32_e32 vcc, v0, v118
	v_lshlrev_b32_e32 v4, 9, v61
	v_add3_u32 v4, v107, v4, v106
	ds_write_b128 v4, v[26:29] offset:64
	ds_write_b128 v4, v[30:33] offset:128
	ds_write_b128 v4, v[34:37] offset:192
	ds_write_b128 v4, v[38:41] offset:256
	ds_write_b128 v4, v[42:45] offset:320
	ds_write_b128 v4, v[46:49] offset:384
	ds_write_b128 v4, v[50:53] offset:448
	v_cndmask_b32_e32 v0, v0, v1, vcc
	v_add_f32_e32 v0, v118, v0
	v_mov_b32_e32 v1, v0
	v_mov_b32_e32 v3, v0
	v_mov_b32_e32 v25, v55
	s_nop 0
	v_permlane32_swap_b32_e32 v1, v3
	ds_write_b128 v4, v[22:25]
	v_cmp_eq_u32_e32 vcc, 0, v105
	s_and_saveexec_b64 s[6:7], vcc
	s_cbranch_execz .LBB0_7
	v_cmp_eq_u32_e32 vcc, v1, v0
	v_lshl_add_u32 v4, v61, 2, v107
	s_nop 0
	v_cndmask_b32_e32 v1, v1, v3, vcc
	v_add_f32_e32 v0, v0, v1
	v_add_u32_e32 v1, 0x2000, v4
	ds_write2_b32 v1, v104, v0 offset1:16
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
	v_lshlrev_b32_e32 v36, 5, v61
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
	v_cmp_eq_u32_e32 vcc, 0, v61
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
		.amdhsa_next_free_vgpr 218
		.amdhsa_next_free_sgpr 96
		.amdhsa_accum_offset 220
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

	.set .Lpa_decode_mxfp4_kernel_0.num_vgpr, 218
	.set .Lpa_decode_mxfp4_kernel_0.num_agpr, 0
	.set .Lpa_decode_mxfp4_kernel_0.numbered_sgpr, 52
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
    .sgpr_count:     58
    .sgpr_spill_count: 0
    .symbol:         pa_decode_mxfp4_kernel_0.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     218
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa-unknown-gfx950
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
